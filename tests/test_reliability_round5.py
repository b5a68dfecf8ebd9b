"""Reliability round 5 (issue 62), each case through the CLI: the config refuses what would lose or mix results."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli
from test_bad_input import assert_one_line_error


def _write(tmp: Path, models: list[dict]) -> Path:  # type: ignore[type-arg]
    (tmp / "w.gguf").write_bytes(b"GGUF")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": models,
        "tasks": {"jbeqa": {"data": str(ROOT / "data" / "jbeqa"), "protocol": "offline-eval"}},
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


@pytest.mark.parametrize("command", [("models", "check"), ("sweep", "--dry-run"), ("sweep",)])
def test_two_legal_names_that_make_one_run_name_are_refused(tmp_path, command):  # type: ignore[no-untyped-def]
    """Model `m.llamacpp.v` variant `w` and model `m` variant `v.llamacpp.w` both made m.llamacpp.v.llamacpp.w.ctx1024:
    the sweep kept one run's results, exited 0, and verify said OK."""
    w = str(tmp_path / "w.gguf")
    cfg = _write(
        tmp_path,
        [
            {"name": "m.llamacpp.v", "backend": "llamacpp", "path": w, "max_model_len": 1024, "variants": {"w": {}}},
            {"name": "m", "backend": "llamacpp", "path": w, "max_model_len": 1024, "variants": {"v.llamacpp.w": {}}},
        ],
    )
    if command[0] == "sweep":
        args = ["sweep", str(cfg), *command[1:]]
    else:
        args = ["models", "check", str(cfg)]
    got = run_cli(*args)
    last = assert_one_line_error(got, str(cfg), "'models'", "both make the run name 'm.llamacpp.v.llamacpp.w.ctx1024'")
    assert got.returncode == 2 and "models.0 ('m.llamacpp.v') variant 'w'" in last
    assert "models.1 ('m') variant 'v.llamacpp.w'" in last and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "variant, needle",
    [
        ({"adapter_scale": 0.5}, "adapter_scale 0.5 without an adapter scales nothing"),
        ({"adapter": "a", "adapter_scale": float("inf")}, "Input should be a finite number"),
        ({"adapter": "a", "adapter_scale": float("nan")}, "Input should be a finite number"),
        ({"adapter": "a", "adapter_scale": 1e308}, "less than or equal to 100"),
    ],
)
def test_a_scale_without_an_adapter_or_beyond_reason_is_refused(tmp_path, variant, needle):  # type: ignore[no-untyped-def]
    """adapter_scale without adapter was ignored without a word; .inf and 1e308 were accepted (nan refused) and
    decoded answers from NaN logits (issue 62, items 5 and 9)."""
    w = str(tmp_path / "w.gguf")
    cfg = _write(tmp_path, [{"name": "m", "backend": "llamacpp", "path": w, "variants": {"v": variant}}])
    for args in (("models", "check", str(cfg)), ("sweep", str(cfg), "--dry-run")):
        got = run_cli(*args)
        assert got.returncode == 2, got.stderr
        assert_one_line_error(got, str(cfg), "models.0.variants.v", needle)


def test_run_refuses_an_adapter_scale_without_an_adapter(tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    got = run_cli("run", "--backend", "llamacpp", "--model", str(tmp_path / "w.gguf"), "--task", "jbeqa", "--data",
                  "data/jbeqa", "--shots", "0", "--adapter-scale", "2", "--out", str(tmp_path / "out"))  # fmt: skip
    assert got.returncode == 2 and not (tmp_path / "out").exists()
    assert_one_line_error(got, "adapter_scale 2.0 without an adapter scales nothing")


def test_a_yaml_alias_bomb_is_refused_in_one_line_before_it_exhausts_memory(tmp_path):  # type: ignore[no-untyped-def]
    """Nested aliases under engine_args passed models check, then hung the sweep (issue 62, item 3)."""
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    bomb = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    bomb += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 10)]  # fmt: skip
    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(
        "models:\n  - name: m\n    backend: llamacpp\n    path: w.gguf\n    engine_args:\n"
        + "".join(f"      {line}\n" for line in bomb)
        + "tasks:\n  jbeqa: {data: data/jbeqa, protocol: offline-eval}\n",
        encoding="utf-8",
    )
    for args in (("models", "check", str(cfg)), ("sweep", str(cfg), "--dry-run"), ("sweep", str(cfg))):
        got = run_cli(*args, timeout=60)
        assert got.returncode == 2
        assert_one_line_error(got, str(cfg), "expands to more than 200,000 values")


def test_yaml_merge_keys_are_read_as_yaml_means_them(tmp_path):  # type: ignore[no-untyped-def]
    """`<<: *base` was called invalid YAML (issue 62, item 16); a key the mapping gives itself overrides the merged
    one, and a key given twice in the mapping itself is still refused."""
    from offline_eval.pipeline.config import load_config

    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    models = "models:\n  - &base {name: a, backend: llamacpp, path: w.gguf, max_model_len: 1024}\n"
    tasks = f"tasks:\n  jbeqa: {{data: {ROOT / 'data' / 'jbeqa'}, protocol: offline-eval}}\n"
    ok = tmp_path / "ok.yaml"
    ok.write_text(models + "  - {<<: *base, name: b, max_model_len: 2048}\n" + tasks, encoding="utf-8")
    a, b = load_config(ok).models
    assert (b.name, b.backend, b.path, b.max_model_len) == ("b", "llamacpp", a.path, 2048)
    got = run_cli("models", "check", str(ok))
    assert got.returncode == 0 and "invalid YAML" not in got.stderr, got.stderr
    twice = tmp_path / "twice.yaml"
    twice.write_text(models + "  - {<<: *base, name: b, name: c}\n" + tasks, encoding="utf-8")
    got = run_cli("models", "check", str(twice))
    assert_one_line_error(got, str(twice), "duplicate key 'name'")


@pytest.mark.engine
def test_a_single_jsonl_runs_at_0_shots_under_the_paper_recording_the_departure(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """`run --task jbeqa --data my.jsonl --shots 0` was refused by the default protocol, which the docs promise runs
    (issue 62, item 15); a few-shot setting without the release's rows stays a one-line refusal."""
    import json

    data = str(ROOT / "data" / "jbeqa" / "test.jsonl")
    base = ["run", "--backend", "llamacpp", "--model", str(tiny / "gguf" / "tiny-q8_0.gguf"), "--task", "jbeqa",
            "--data", data, "--mode", "constrained", "--limit", "2"]  # fmt: skip
    got = run_cli(*base, "--shots", "0", "--out", str(tmp_path / "zero"))
    assert got.returncode == 0, got.stderr[-2000:]
    (entry,) = json.loads((tmp_path / "zero" / "summary.json").read_text(encoding="utf-8"))["runs"]
    assert entry["protocol"] == "paper" and any("no exemplar rows left unscored" in d for d in entry["departures"])
    four = run_cli(*base, "--shots", "4", "--out", str(tmp_path / "four"))
    assert four.returncode == 2
    assert_one_line_error(four, data, "rows 113, 1285, 1628, 2609", "exemplar_ids", "protocol: offline-eval")


def test_an_adapter_held_to_the_same_adapter_on_the_reference_names_that_run(tmp_path):  # type: ignore[no-untyped-def]
    """The report said "against the same adapter on None" when the own-weights adapter run was the model's
    reference (issue 62, item 11): the transfer verdict names the run it is held to, always."""
    from offline_eval.models.spec import ModelSpec
    from offline_eval.pipeline.analyses.verdicts import build
    from offline_eval.report.glance import adapter_lines
    from offline_eval.results.records import RunEntry, RunKey
    from offline_eval.results.summary import ModelVerdicts, Summary
    from offline_eval.tasks import make_task
    from offline_eval.tasks.jbeqa.records import JBEQARecord

    m = ModelSpec.model_validate(
        {"name": "m", "backend": "vllm", "path": "/w", "max_model_len": 1024, "reference": "a",
         "variants": {"bf16": {}, "a": {"adapter": "/a"}, "w4": {"file": "/w4"}, "w4-a": {"file": "/w4", "adapter": "/a"}}}
    )  # fmt: skip
    task = make_task("jbeqa", {"data": str(ROOT / "data" / "jbeqa"), "protocol": "offline-eval", "shots": [0],
                               "mode": ["constrained"]}, str(tmp_path / "m.yaml"))  # fmt: skip
    setting = "jbeqa.0shot.constrained"
    runs, records = [], {}
    for v in m.variants:
        run = m.run_name(v, 1024)
        runs.append(RunEntry(model="m", variant=v, backend="vllm", run=run, max_model_len=1024, task="jbeqa",
                             setting=setting, options={"shots": 0, "mode": "constrained"}, prompt_format="plain",
                             n_items=30, primary_metric="f1", metrics={}, weights_mb=0.0, throughput={}))  # fmt: skip
        records[RunKey(run, setting)] = [
            JBEQARecord(id=f"q{i // 3}-{i % 3}", subject="民法", year=2020, output="1", finish_reason="stop", gold=1,
                        parsed=1, pred=1, scores={"correct": int(i % 4 != 0)})
            for i in range(30)
        ]  # fmt: skip
    (got,) = build([m], {}, records, runs, {"jbeqa": task})
    (transfer,) = got["adapter_transfer"]
    assert transfer["run"] == "m.vllm.w4-a.ctx1024" and transfer["against"] == "m.vllm.a.ctx1024"
    summary = Summary(schema_version=5, runs=runs, noninferiority=[ModelVerdicts.model_validate(got)])
    (line,) = [x for x in adapter_lines(summary) if x.startswith("Adapter on another base")]
    assert "against the same adapter on m.vllm.a.ctx1024" in line and "None" not in line


@pytest.mark.engine
def test_quantize_refuses_a_type_twice_and_an_output_inside_its_source(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """`--to w8a8,w8a8` wrote, then exited 2 saying to remove what it wrote; `quantize X --out X` nested the copy
    inside its source (issue 62, items 8 and 16): both refused before anything is written."""
    src = str(tiny / "hf")
    twice = run_cli("quantize", src, "--to", "w8a8,w8a8", "--out", str(tmp_path / "q"))
    assert twice.returncode == 2 and not (tmp_path / "q").exists()
    assert_one_line_error(twice, "w8a8 given twice", "'--to'")
    (tmp_path / "file").write_text("x")
    for args in ((src, "w8a8"), (str(tiny / "gguf" / "tiny-f16.gguf"), "q8_0")):
        got = run_cli("quantize", args[0], "--to", args[1], "--out", str(tmp_path / "file"))
        assert_one_line_error(got, str(tmp_path / "file"), "'--out'", "is a file")
    for inside in (src, str(tiny / "hf" / "sub")):
        got = run_cli("quantize", src, "--to", "w8a8", "--out", inside)
        assert got.returncode == 2 and not (tiny / "hf" / "sub").exists()
        assert_one_line_error(got, inside, "'--out'", "is inside the model folder")


def test_a_quantized_folder_is_made_with_the_umasks_permissions(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Quantized folders were written 0700 (mkdtemp's) whatever the umask (issue 62, item 16). The quantization
    itself is stood in for (test_quantize_hf makes real ones): this is the folder's making, renaming and mode."""
    import os

    from offline_eval.models.quantize import hf

    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text("{}", encoding="utf-8")
    (src / "tokenizer.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(hf, "_compressed", lambda s, scheme, out, group: (out / "config.json").write_text("{}"))
    old = os.umask(0o027)
    try:
        hf.make(src, "w8a8", tmp_path / "q", 128)
    finally:
        os.umask(old)
    assert (tmp_path / "q").stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["config.json", hf.RECORD, "tokenizer.json"]


@pytest.mark.parametrize(
    "data, needle",
    [
        (b"\xff" * 8 + b"{}", "header claims 18,446,744,073,709,551,615 bytes"),
        ((2**40).to_bytes(8, "little") + b"{}", "header claims 1,099,511,627,776 bytes"),
        ((2).to_bytes(8, "little") + b"[]", "not a JSON object"),
    ],
)
def test_a_random_or_oversized_safetensors_header_is_one_line_naming_the_file(tmp_path, data, needle):  # type: ignore[no-untyped-def]
    """It gave a MemoryError or an OverflowError naming no file (issue 62, item 16), here through an adapter."""
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(
        '{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}', encoding="utf-8"
    )
    (folder / "adapter_model.safetensors").write_bytes(data)
    (tmp_path / "hf").mkdir()
    cfg = _write(tmp_path, [{"name": "m", "backend": "transformers", "path": str(tmp_path / "hf"),
                             "variants": {"a": {"adapter": str(folder)}}}])  # fmt: skip
    got = run_cli("models", "check", str(cfg))
    assert got.returncode != 0 and "MemoryError" not in got.stderr and "OverflowError" not in got.stderr
    assert needle in got.stderr and str(folder / "adapter_model.safetensors") in got.stderr, got.stderr


@pytest.mark.engine
def test_an_adapter_rewritten_in_place_with_its_mtime_set_back_is_hashed_again(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """The file-digest cache was keyed by (path, size, mtime, inode): one weight of the adapter changed in place,
    then os.utime set the old mtime back, and the sweep served the old adapter's answers from the store (issue 62,
    item 7). ctime, which no tool can set back, is in the key now, for adapters and weights alike."""
    import os
    import re

    adapter = tmp_path / "a.gguf"
    adapter.write_bytes((tiny / "adapters" / "a.gguf").read_bytes())
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "tl", "backend": "llamacpp", "path": str(tiny / "gguf" / "tiny-f16.gguf"),
                    "max_model_len": 1024, "variants": {"a": {"adapter": str(adapter)}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0],
                            "mode": ["logprob"], "limit": 4}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))

    def counts() -> tuple[int, int]:
        got = run_cli("sweep", str(path))
        assert got.returncode == 0, got.stderr[-2000:]
        found = re.search(r"\((\d+) generated, (\d+) cached", got.stdout + got.stderr)
        assert found, got.stderr[-2000:]
        return int(found.group(1)), int(found.group(2))

    assert counts() == (4, 0)
    assert counts() == (0, 4)  # unchanged: from the store
    before = adapter.stat()
    with adapter.open("r+b") as f:  # the low byte of the last weight: same size, same inode
        f.seek(-2, os.SEEK_END)
        low = f.read(1)[0]
        f.seek(-2, os.SEEK_END)
        f.write(bytes([low ^ 1]))
    os.utime(adapter, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = adapter.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert counts() == (4, 0)  # another adapter: asked again


def test_only_the_files_an_engine_reads_are_the_weights_identity(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """Every file under a model folder was hashed as weights: a model card edited, or a folder of notes dropped
    beside the weights, regenerated every answer (issue 62, item 8). The weights' identity is now the files an engine
    reads (fingerprint.ENGINE_READS); a change to one of those still asks again."""
    import re
    import shutil

    model = tmp_path / "m"
    shutil.copytree(tiny / "hf", model)
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "t", "backend": "transformers", "path": str(model), "max_model_len": 1024,
                    "variants": {"bf16": {"dtype": "bfloat16"}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0],
                            "mode": ["logprob"], "limit": 2}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))

    def counts() -> tuple[int, int]:
        got = run_cli("sweep", str(path))
        assert got.returncode == 0, got.stderr[-2000:]
        found = re.search(r"\((\d+) generated, (\d+) cached", got.stdout + got.stderr)
        assert found, got.stderr[-2000:]
        return int(found.group(1)), int(found.group(2))

    assert counts() == (2, 0)
    (model / "README.md").write_text("# a model card, edited\n", encoding="utf-8")
    (model / "notes").mkdir()
    (model / "notes" / "eval.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (model / "LICENSE").write_text("terms\n", encoding="utf-8")
    assert counts() == (0, 2)  # none of them is read by an engine: the answers are the store's
    config = model / "generation_config.json"
    config.write_text(config.read_text(encoding="utf-8").replace("{", '{"_note": 1,', 1), encoding="utf-8")
    assert counts() == (2, 0)  # a file the engine reads changed: asked again


@pytest.mark.parametrize("command", [("models", "check"), ("sweep", "--dry-run"), ("sweep",)])
def test_an_output_folder_inside_a_model_or_adapter_folder_is_refused(tmp_path, command):  # type: ignore[no-untyped-def]
    """Every file under a model folder is hashed as its weights: a store inside it changed the weights' digest on
    every write, so each sweep generated everything again and verify never passed (issue 62, item 8)."""
    model, adapter = tmp_path / "model", tmp_path / "adapter"
    for folder in (model, adapter):
        folder.mkdir()
    (model / "config.json").write_text("{}")
    cfg = {
        "output_dir": "model/runs",  # relative: read from the config's folder
        "models": [{"name": "t", "backend": "transformers", "path": "model",
                    "variants": {"a": {"adapter": str(adapter)}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0]}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    got = run_cli(*command, str(path))
    assert got.returncode == 2
    assert_one_line_error(got, str(path), "field 'output_dir'", f"inside models.0.path ({model})")
    assert not (model / "runs").exists()
    if command == ("sweep",):
        cfg["output_dir"] = str(tmp_path / "out")
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        got = run_cli("sweep", str(path), "--out", str(adapter / "runs"))
        assert got.returncode == 2
        assert_one_line_error(got, "field '--out'", f"inside models.0.variants.a.adapter ({adapter})")
        assert not (adapter / "runs").exists()


@pytest.mark.parametrize(
    ("backend", "quantization", "needle"),
    [
        ("vllm", "fp8", "vLLM's CPU build quantizes no weights as it loads them"),
        ("vllm", "int8", "quantization 'int8' is transformers' (torchao)"),
        ("transformers", "fp8", "transformers quantizes unquantized weights as int8 or int4"),
    ],
)
def test_a_quantization_the_engine_cannot_apply_is_one_line_before_it_starts(
    tmp_path, tiny, backend, quantization, needle
):  # type: ignore[no-untyped-def]
    """`quantization: fp8` on vLLM's CPU build died with vLLM's RuntimeError, and `int8` (transformers' name) with
    its ValidationError (issue 62, item 16): both are refused by models check, and the dry run says the run will
    fail, naming the field."""
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "t", "backend": backend, "path": str(tiny / "hf"), "max_model_len": 1024,
                    "variants": {"q": {"quantization": quantization}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0]}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    got = run_cli("models", "check", str(path))
    assert got.returncode == 2
    said = got.stdout + got.stderr
    assert "Traceback" not in said and "field 'models.0.variants.q.quantization'" in said and needle in said, said
    plan = run_cli("sweep", "--dry-run", str(path))
    assert "(will fail: " in plan.stdout + plan.stderr and needle in plan.stdout + plan.stderr, plan.stderr[-2000:]


def test_runs_of_another_protocol_leave_the_summary_of_an_only_sweep(tmp_path):  # type: ignore[no-untyped-def]
    """The setting name does not carry the protocol: after the config's protocol was switched, `sweep --only a` kept
    model b's runs of the old protocol beside a's new ones, under one setting name (issue 62, item 13)."""
    import json

    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights")
    data = str(ROOT / "data" / "jbeqa" / "test.jsonl")
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": n, "backend": "fake", "path": str(weights)} for n in ("a", "b")],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": data, "shots": [0], "mode": ["constrained"],
                            "limit": 3}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"

    def sweep(*extra: str) -> list[tuple[str, str, str]]:
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        got = run_cli("sweep", str(path), *extra)
        assert got.returncode == 0, got.stderr[-2000:]
        summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
        return sorted((r["run"].split(".")[0], r["setting"], r["protocol"]) for r in summary["runs"])

    setting = "jbeqa.0shot.constrained"
    assert sweep() == [("a", setting, "offline-eval"), ("b", setting, "offline-eval")]
    cfg["tasks"]["jbeqa"]["protocol"] = "paper"
    assert sweep("--only", "a") == [("a", setting, "paper")]  # b's offline-eval run is not this config's
    assert sweep() == [("a", setting, "paper"), ("b", setting, "paper")]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"target_modules": ["nosuch_proj"]}, "which target_modules ['nosuch_proj'] leaves out"),
        ({"target_modules": []}, "which target_modules [] leaves out"),
        ({"layers_to_transform": [0]}, "model.layers.1.mlp.down_proj, which target_modules"),
        ({"target_modules": "model\\.layers\\.0\\..*"}, "model.layers.1.mlp.down_proj, which target_modules"),
        ({"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                             "nosuch_proj"]}, "field 'target_modules': the base model"),
        ({"target_modules": "(unclosed"}, "is not a regular expression"),
    ],
)  # fmt: skip
def test_an_adapter_whose_config_leaves_out_modules_its_weights_adapt_is_refused(tmp_path, tiny, change, needle):  # type: ignore[no-untyped-def]
    """peft applies only the modules target_modules and layers_to_transform name; vLLM and `adapter gguf` applied
    every tensor in the file, so one adapter answered differently per engine, and `target_modules: [nosuch_proj]`
    ran silently on vLLM (issue 62, item 6). Config and weights must agree; a module the base lacks is refused."""
    import json
    import shutil

    adapter = tmp_path / "adapter"
    shutil.copytree(tiny / "adapters" / "a", adapter)
    cfg_file = adapter / "adapter_config.json"
    cfg_file.write_text(json.dumps({**json.loads(cfg_file.read_text()), **change}))
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "t", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 1024,
                    "variants": {"a": {"adapter": str(adapter)}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0]}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    got = run_cli("models", "check", str(path))
    said = got.stdout + got.stderr
    assert got.returncode == 2 and "Traceback" not in said and needle in said and str(cfg_file) in said, said
    converted = run_cli("adapter", "gguf", str(adapter), "--base", str(tiny / "hf"), "--out", str(tmp_path / "a.gguf"))
    if "field 'target_modules': the base model" not in needle:  # adapter gguf reads the config as the engines do
        assert_one_line_error(converted, str(cfg_file), needle)
        assert not (tmp_path / "a.gguf").exists()


def test_adapter_gguf_refuses_an_adapter_trained_on_another_architecture(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """`adapter gguf` converted the tiny llama adapter against Gemma 3's GGUF and exited 0 (issue 62, item 10): the
    shapes are checked against the base, as models check does, and nothing is written."""
    gemma = ROOT / "models" / "gemma-3-270m" / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    if not gemma.is_file():
        pytest.skip("set-up builds the Gemma GGUF (scripts/setup.sh)")
    out = tmp_path / "a.gguf"
    got = run_cli("adapter", "gguf", str(tiny / "adapters" / "a"), "--base", str(gemma), "--out", str(out))
    assert got.returncode == 2
    assert_one_line_error(got, "field 'model.layers.0.mlp.down_proj'", "256 -> 128", "2048 -> 640", "(gemma3 here)")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_killed_quantize_leaves_nothing_a_later_one_does_not_remove_and_name(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """SIGKILL runs no clean-up: the hidden temporary folder of a 7B model's quantized copy (gigabytes) stayed
    forever, and a killed GGUF quantize left a truncated file under the final name (issue 62, item 16). The
    temporaries name their process; the next quantize into the folder removes those of dead processes, one line
    each, and leaves a running one's alone."""
    import os
    import subprocess
    import sys

    dest = tmp_path / "out"
    dest.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process that no longer runs, as after a SIGKILL
    stale = dest / f".tiny-w8a8.offline-eval-{gone.pid}.x1y2"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"\0" * 2**20)
    stale_part = dest / f".tiny-q8_0.gguf.offline-eval-{gone.pid}.part"
    stale_part.write_bytes(b"\0" * 1024)
    running = dest / f".other-w8a8.offline-eval-{os.getpid()}.abc"
    running.mkdir()
    got = run_cli("quantize", str(tiny / "hf"), "--to", "w8a8", "--out", str(dest))
    assert got.returncode == 0, got.stderr[-2000:]
    assert f"removed {stale} (1.0 MiB), which a killed offline-eval (pid {gone.pid}) left" in got.stderr
    assert f"removed {stale_part}" in got.stderr
    assert not stale.exists() and not stale_part.exists() and running.is_dir()
    assert sorted(p.name for p in dest.iterdir()) == sorted([running.name, "tiny-w8a8"])
    q = run_cli("quantize", str(tiny / "gguf" / "tiny-f16.gguf"), "--to", "q8_0", "--out", str(dest / "gguf"))
    assert q.returncode == 0, q.stderr[-2000:]
    assert [p.name for p in (dest / "gguf").iterdir()] == ["tiny-q8_0.gguf"]  # written aside, renamed into place


def test_one_adapter_of_a_rank_vllm_cannot_hold_fails_alone(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """A rank-1024 adapter in a shared group set the group's max_lora_rank past vLLM's largest (512): every adapter
    variant failed, each blaming its own adapter, while models check and the dry run said OK (issue 62, item 16).
    It is refused there now, and in a sweep it fails alone; the others share their engine as before."""
    import json
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    big = tmp_path / "big"
    shutil.copytree(tiny / "adapters" / "a", big)
    tensors = load_file(big / "adapter_model.safetensors")
    for name, t in list(tensors.items()):  # rank 8 -> 1024 with zeros: the same update, a rank vLLM cannot hold
        pad = [(0, 1016), (0, 0)] if ".lora_A." in name else [(0, 0), (0, 1016)]
        tensors[name] = np.pad(t, pad)
    save_file(tensors, big / "adapter_model.safetensors")
    cfg_file = big / "adapter_config.json"
    cfg_file.write_text(json.dumps({**json.loads(cfg_file.read_text()), "r": 1024, "lora_alpha": 2048}))
    adapters = {"a": tiny / "adapters" / "a", "big": big, "b": tiny / "adapters" / "b"}
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "tv", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 1024,
                    "variants": {k: {"adapter": str(v)} for k, v in adapters.items()}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(ROOT / "data" / "jbeqa"), "shots": [0],
                            "mode": ["constrained"], "limit": 2}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    needle = f"{cfg_file}: field 'r': rank 1024 is above vLLM's largest max_lora_rank (512)"
    check = run_cli("models", "check", str(path))
    assert check.returncode == 2 and needle in check.stdout + check.stderr, check.stdout + check.stderr
    plan = run_cli("sweep", "--dry-run", str(path))
    assert f"load tv.vllm.big.ctx1024  (will fail: {needle}" in plan.stdout + plan.stderr, plan.stderr[-2000:]
    got = run_cli("sweep", str(path))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(f["run"], needle in f["reason"]) for f in summary["failures"]] == [("tv.vllm.big.ctx1024", True)]
    assert {r["run"] for r in summary["runs"]} == {"tv.vllm.a.ctx1024", "tv.vllm.b.ctx1024"}, got.stderr[-3000:]
    assert "(no new start)" in got.stderr.split("[tv.vllm.b.ctx1024]", 2)[2], got.stderr[-3000:]  # a's engine


def test_a_paper_labelled_run_names_what_departs_from_the_paper(tmp_path):  # type: ignore[no-untyped-def]
    """Model-level settings never counted as departures, so a run with its own sampling was labelled "paper" bare;
    LegalRikai's paper runs named none of their departures (issue 62, item 12). The summary, the dry run and the
    first screen name them now, a model's own with its run."""
    import json

    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights")
    model = {"name": "m", "backend": "fake", "path": str(weights), "sampling": {"temperature": 0.7, "seed": 3}}
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [model, {"name": "g", "backend": "fake", "path": str(weights)}],
        "tasks": {"jbeqa": {"data": str(ROOT / "data" / "jbeqa" / "test.jsonl"), "shots": [0], "mode": ["free"],
                            "limit": 2}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    phrase = "m.fake.default.ctx4096: sampling from models.yaml (temperature 0.7, seed 3; the paper's: greedy)"
    plan = run_cli("sweep", "--dry-run", str(path))
    assert f"departing: {phrase}" in plan.stdout + plan.stderr, plan.stdout + plan.stderr
    got = run_cli("sweep", str(path))
    assert got.returncode == 0, got.stderr[-2000:]
    runs = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))["runs"]
    own = {r["run"].split(".")[0]: [d for d in r["departures"] if d.startswith(r["run"])] for r in runs}
    assert own == {"m": [phrase], "g": []}, own
    assert phrase in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")

    cfg["tasks"] = {"legalrikai": {"data": str(ROOT / "data" / "legalrikai"), "judges": [
        {"name": "j", "backend": "fake", "path": str(weights)}]}}  # fmt: skip
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    plan = run_cli("sweep", "--dry-run", str(path))
    said = plan.stdout + plan.stderr
    for needle in ("paper protocol, departing: candidate and judge prompts ours", "LLM judges from the config",
                   "an answer its cap cuts is left out of every mean", "overflow: focus"):  # fmt: skip
        assert needle in said, (needle, said[-3000:])


def test_a_reasoning_model_runs_jbeqas_paper_reasoning_protocol_under_paper(tmp_path):  # type: ignore[no-untyped-def]
    """JBE-QA's paper ran its reasoning models sampled at temperature 1.0 and top_k 50, thinking up to a quarter of
    the model's length, a thinking that ran out scored 0. That lived only in a docs recipe: under paper a model
    declared as reasoning ran greedy with models.yaml's budget, named as a departure (issue 62, item 12). The preset
    applies now where models.yaml leaves it, and what models.yaml sets otherwise is named."""
    import json
    import sqlite3

    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights")
    model = {"name": "r", "backend": "fake", "path": str(weights), "max_model_len": 4096, "reasoning": {"think": True},
             "engine_args": {"default": "<think>" + "考" * 1500}}  # fmt: skip
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [model],
        "tasks": {"jbeqa": {"data": str(ROOT / "data" / "jbeqa" / "test.jsonl"), "shots": [0], "limit": 2}},
    }
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    plan = run_cli("sweep", "--dry-run", str(path))
    assert plan.returncode == 0 and "departing: r.fake" not in plan.stdout + plan.stderr, plan.stdout + plan.stderr
    got = run_cli("sweep", str(path))
    assert got.returncode == 0, got.stderr[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    (run,) = summary["runs"]
    assert not [d for d in run["departures"] if d.startswith("r.fake")], run["departures"]
    with sqlite3.connect(tmp_path / "out" / "store.sqlite") as db:
        asked = [json.loads(r) for (r,) in db.execute("SELECT request FROM outputs")]
    thinking = [a["sampling"] for a in asked]
    assert thinking and all((s["temperature"], s["top_k"]) == (1.0, 50) for s in thinking), thinking
    assert {s["max_tokens"] for s in thinking} == {4096 // 4}  # the thinking's budget: a quarter of the length
    recs = [json.loads(x) for x in (tmp_path / "out" / "results" / run["run"] / f"{run['setting']}.jsonl")
            .read_text(encoding="utf-8").splitlines()]  # fmt: skip
    assert len(recs) == 2 and all(r["parsed"] is None and r["scores"]["correct"] == int(r["gold"] == 0) for r in recs)
    (load,) = summary["provenance"]["loads"]
    how = load["decoding"]["tasks"]["jbeqa"]
    assert (how["sampling"]["temperature"], how["reasoning"]["budget"], how["reasoning"]["run_out"]) == (
        1.0, 1024, "no-answer")  # fmt: skip

    # models.yaml's own settings stay, each named
    model.update(sampling={"temperature": 0.6}, reasoning={"think": True, "budget": 64, "run_out": "force"})
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    plan = run_cli("sweep", "--dry-run", str(path))
    said = plan.stdout + plan.stderr
    for phrase in ("sampling from models.yaml (temperature 0.6; the paper's: temperature 1.0, top_k 50)",
                   "a thinking budget of 64 (the paper's: the context // 4, 1024)",
                   "run_out: force (the paper's: no-answer, a thinking that runs out scores 0)"):  # fmt: skip
        assert f"departing: r.fake.default.ctx4096: {phrase}" in said, (phrase, said[-3000:])
