"""`offline-eval quantize` on a Hugging Face folder (w8a8, w4a16, gptq) and those folders on vLLM and transformers:
each scheme loads through a sweep, constrained answers parse, the store key and the provenance follow the scheme,
verify rebuilds the folder, and the two engines agree on the same compressed-tensors weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import DATA, TINY, int4_kernel_problem, metric, run_cli
from test_bad_input import assert_one_line_error

QUANT = TINY / "quant"
SCHEMES = ("w8a8", "w4a16", "gptq", "awq")


@pytest.fixture(scope="module")
def quantized(tiny) -> Path:
    """The tiny model's three quantized folders, made by the command itself (kept between sessions, as tiny is)."""
    missing = [s for s in SCHEMES if not (QUANT / f"tiny-{s}" / "config.json").exists()]
    for s in missing:
        shutil.rmtree(QUANT / f"tiny-{s}", ignore_errors=True)
    if missing:
        proc = run_cli("quantize", str(TINY / "hf"), "--to", ",".join(missing), "--out", str(QUANT))
        assert proc.returncode == 0, proc.stderr
        assert [x.split(" (")[0] for x in proc.stdout.splitlines()] == [f"wrote {QUANT / f'tiny-{s}'}" for s in missing]
    return QUANT


def test_each_scheme_is_written_with_its_record(quantized):
    from safetensors import safe_open

    configs = {
        s: json.loads((quantized / f"tiny-{s}" / "config.json").read_text())["quantization_config"] for s in SCHEMES
    }
    assert configs["w8a8"]["format"] == "int-quantized" and configs["w4a16"]["format"] == "pack-quantized"
    assert configs["gptq"] == {
        "quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
        "checkpoint_format": "gptq", "lm_head": False,
    }  # fmt: skip
    source = {f.name: f for f in (TINY / "hf").iterdir() if f.is_file()}
    import hashlib

    assert configs["awq"] == {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
        "modules_to_not_convert": None,
    }  # fmt: skip
    for s in SCHEMES:
        record = json.loads((quantized / f"tiny-{s}" / "quantization.json").read_text())
        assert record["scheme"] == s and record["group_size"] == (None if s == "w8a8" else 128)
        assert record["calibration"] is None and "round-to-nearest" in record["algorithm"]
        assert record["tools"]["compressed-tensors"] == "0.17.0"
        assert record["source_files_sha256"] == {
            n: hashlib.sha256(f.read_bytes()).hexdigest() for n, f in source.items()
        }
    with safe_open(str(quantized / "tiny-w8a8" / "model.safetensors"), "pt") as f:
        w = f.get_tensor("model.layers.0.mlp.down_proj.weight")
        assert str(w.dtype) == "torch.int8"  # int8 values, not a bf16 copy labelled int8


def test_gptq_and_awq_hold_the_w4a16_values(quantized):
    """An independent decode of GPTQ's layout (8 nibbles per int32 down the input dimension, symmetric around 8)
    and of AWQ's (8 nibbles per int32 across output columns, in the order 0 2 4 6 1 3 5 7, zero point 8) against
    compressed-tensors' own decode of the W4A16 folder: the same int4 values and scales."""
    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from safetensors.torch import load_file

    ct = load_file(quantized / "tiny-w4a16" / "model.safetensors")
    gq = load_file(quantized / "tiny-gptq" / "model.safetensors")
    aw = load_file(quantized / "tiny-awq" / "model.safetensors")
    layers = sorted(k.removesuffix(".weight_packed") for k in ct if k.endswith(".weight_packed"))
    assert len(layers) == 14
    for m in layers:
        shape = torch.Size(ct[f"{m}.weight_shape"].tolist())
        values = unpack_from_int32(ct[f"{m}.weight_packed"], 4, shape)  # [out, in], -8..7
        packed = gq[f"{m}.qweight"].to(torch.int64) & 0xFFFFFFFF  # [in/8, out]
        nibbles = torch.stack([(packed >> (4 * i)) & 0xF for i in range(8)], dim=1)  # [in/8, 8, out]
        decoded = nibbles.reshape(shape[1], shape[0]).T - 8
        assert torch.equal(decoded, values.to(torch.int64)), m
        assert torch.equal(gq[f"{m}.scales"].float(), ct[f"{m}.weight_scale"].T.float()), m
        packed = aw[f"{m}.qweight"].to(torch.int64) & 0xFFFFFFFF  # [in, out/8]
        nibbles = torch.stack([(packed >> (4 * i)) & 0xF for i in range(8)], dim=-1)  # [in, out/8, 8]
        columns = torch.empty_like(nibbles)
        columns[..., [0, 2, 4, 6, 1, 3, 5, 7]] = nibbles
        zeros = aw[f"{m}.qzeros"].to(torch.int64) & 0xFFFFFFFF
        assert all(((zeros >> (4 * i)) & 0xF).eq(8).all() for i in range(8)), m
        assert torch.equal(columns.reshape(shape[1], shape[0]).T - 8, values.to(torch.int64)), m
        assert torch.equal(aw[f"{m}.scales"], gq[f"{m}.scales"]), m


def _sweep(tmp: Path, models: list[dict], modes=("constrained", "logprob")) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": models,
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": list(modes)}},
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


def test_each_scheme_runs_on_vllm_and_agrees_with_transformers(tmp_path, quantized):
    folder = {s: str(quantized / f"tiny-{s}") for s in SCHEMES}
    models = [
        {
            "name": "tq",
            "backend": "vllm",
            "path": str(TINY / "hf"),
            "max_model_len": 1024,
            "variants": {"bf16": {}, **{s: {"file": folder[s]} for s in SCHEMES}},
        },
        *(
            {"name": f"hf-{s}", "backend": "transformers", "path": folder[s], "max_model_len": 1024,
             "same_weights_as": f"vl-{s}"}
            for s in ("w8a8", "w4a16")
        ),
        *({"name": f"vl-{s}", "backend": "vllm", "path": folder[s], "max_model_len": 1024} for s in ("w8a8", "w4a16")),
    ]  # fmt: skip
    out = tmp_path / "out"
    proc = run_cli("sweep", str(_sweep(tmp_path, models)))
    if (no_int4 := int4_kernel_problem()) is not None:  # an AVX2 processor: each int4 run fails in one line
        summary = json.loads((out / "summary.json").read_text())
        failed = {f["run"]: f["reason"] for f in summary["failures"]}
        assert set(failed) == {"tq.vllm.w4a16.ctx1024", "tq.vllm.gptq.ctx1024", "tq.vllm.awq.ctx1024",
                               "vl-w4a16.vllm.default.ctx1024"}, failed  # fmt: skip
        assert all("cpu_gemm_wna16 needs AVX-512" in r and "Traceback" not in r for r in failed.values()), failed
        assert metric(summary["runs"][0], "faithfulness") == 1.0 and "Traceback" not in proc.stderr
        pytest.skip(f"int4 on vLLM's CPU build, here: {no_int4}")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    runs = {(r["run"], r["setting"]): r for r in summary["runs"]}
    for s in ("bf16", *SCHEMES):
        assert metric(runs[(f"tq.vllm.{s}.ctx1024", "jbeqa.0shot.constrained")], "faithfulness") == 1.0
    loads = {x["run"]: x for x in summary["provenance"]["loads"]}
    keys = [loads[f"tq.vllm.{s}.ctx1024"]["store_fingerprint"] for s in ("bf16", *SCHEMES)]
    assert len(set(keys)) == 5  # the store key follows the weights, so the scheme
    q = {s: loads[f"tq.vllm.{s}.ctx1024"]["quantization"] for s in SCHEMES}
    assert loads["tq.vllm.bf16.ctx1024"]["quantization"] is None
    assert (q["w8a8"]["scheme"], q["w8a8"]["activations"]) == ("w8a8", "int8 dynamic per-token")
    assert (q["w4a16"]["scheme"], q["w4a16"]["group_size"], q["gptq"]["method"]) == ("w4a16", 128, "gptq")
    start = loads["tq.vllm.w4a16.ctx1024"]["engine_start"]
    assert start["quantization"] == "compressed-tensors w4a16, group 128" and start["int4_kernel"].startswith("w4a")

    def answers(run: str) -> list:
        lines = (out / "results" / run / "jbeqa.0shot.constrained.jsonl").read_text().splitlines()
        return [json.loads(x)["pred"] for x in lines]

    # GPTQ's and AWQ's layouts hold W4A16's values, and vLLM sends all three to the same int4 kernel.
    assert answers("tq.vllm.gptq.ctx1024") == answers("tq.vllm.w4a16.ctx1024") == answers("tq.vllm.awq.ctx1024")
    assert loads["tq.vllm.awq.ctx1024"]["quantization"]["method"] == "awq"

    # vLLM's int8/int4 kernels against transformers' decompressed weights: measured on the 26 sample items, 24-26
    # identical constrained answers (W8A8; activations rounded per token by both) and 26 (W4A16), label
    # probabilities within 0.02 on average; a misread checkpoint agrees at chance (about half).
    rows = {(frozenset((c["run_a"], c["run_b"])), c["setting"]): c for c in summary["consistency"]}
    assert len(rows) == 4, summary["consistency"]
    for s, floor in (("w8a8", 0.85), ("w4a16", 0.9)):
        pair = frozenset((f"vl-{s}.vllm.default.ctx1024", f"hf-{s}.transformers.default.ctx1024"))
        for mode in ("constrained", "logprob"):
            row = rows[(pair, f"jbeqa.0shot.{mode}")]
            assert row["n_items"] == 26 and row["identical"] >= floor, row
        assert rows[(pair, "jbeqa.0shot.logprob")]["mean_abs_diff_p_true"] < 0.05

    check = run_cli("verify", str(out))
    assert check.returncode == 0 and "OK" in check.stdout, check.stdout + check.stderr


def test_bad_folders_fail_their_variant_in_one_line(tmp_path, quantized):
    """A quantization: key that contradicts the folder, a config whose declared weights are missing, a scheme the
    CPU build has no kernel for, and a GPTQ folder on transformers without optimum: each fails naming config.json
    and the field; the others run."""
    missing = tmp_path / "missing"
    shutil.copytree(TINY / "hf", missing)
    cfg = json.loads((missing / "config.json").read_text())
    w8 = json.loads((quantized / "tiny-w8a8" / "config.json").read_text())["quantization_config"]
    (missing / "config.json").write_text(json.dumps({**cfg, "quantization_config": w8}))
    fp8 = tmp_path / "fp8"
    shutil.copytree(quantized / "tiny-w8a8", fp8)
    cfg = json.loads((fp8 / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    (fp8 / "config.json").write_text(json.dumps(cfg))
    models = [
        {
            "name": "tq",
            "backend": "vllm",
            "path": str(TINY / "hf"),
            "max_model_len": 1024,
            "variants": {
                "bf16": {},
                "contradicts": {"file": str(quantized / "tiny-gptq"), "quantization": "awq"},
                "missing": {"file": str(missing)},
                "fp8": {"file": str(fp8)},
            },
        },
        {"name": "hq", "backend": "transformers", "path": str(quantized / "tiny-gptq"), "max_model_len": 1024},
    ]
    out = tmp_path / "out"
    config = _sweep(tmp_path, models, modes=("constrained",))
    dry = run_cli("sweep", str(config), "--dry-run")  # the plan says so before any engine starts
    assert "load tq.vllm.contradicts.ctx1024  (will fail: " in dry.stderr and "quantization 'awq'" in dry.stderr
    assert "load tq.vllm.missing.ctx1024  (will fail: " in dry.stderr
    proc = run_cli("sweep", str(config))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    failures = {f["run"]: f["reason"] for f in json.loads((out / "summary.json").read_text())["failures"]}
    assert set(failures) == {f"tq.vllm.{v}.ctx1024" for v in ("contradicts", "missing", "fp8")} | {
        "hq.transformers.default.ctx1024"
    }
    assert (
        "transformers loads gptq w4a16, group 128 folders through optimum"
        in failures["hq.transformers.default.ctx1024"]
    )
    assert (
        f"{quantized / 'tiny-gptq' / 'config.json'}, field 'quantization_config"
        in failures["tq.vllm.contradicts.ctx1024"]
    )
    assert "quantization 'awq'" in failures["tq.vllm.contradicts.ctx1024"]
    assert "declares gptq w4a16" in failures["tq.vllm.contradicts.ctx1024"]
    assert "no tensor in the weights ends in .weight_scale" in failures["tq.vllm.missing.ctx1024"]
    assert str(missing / "config.json") in failures["tq.vllm.missing.ctx1024"]
    assert "needs a GPU" in failures["tq.vllm.fp8.ctx1024"]
    assert (out / "results" / "tq.vllm.bf16.ctx1024" / "jbeqa.0shot.constrained.jsonl").exists()


def test_a_group_that_does_not_divide_fails_its_scheme_and_the_others_are_made(tmp_path, tiny):
    proc = run_cli("quantize", str(TINY / "hf"), "--to", "w4a16,w8a8", "--group-size", "96", "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    line = assert_one_line_error(proc, str(TINY / "hf" / "config.json"), "'--group-size'", "w4a16 not made")
    assert "group size 96 does not divide hidden_size 128" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-w8a8"]  # made, and nothing half-written beside it
    assert proc.stdout.startswith(f"wrote {tmp_path / 'tiny-w8a8'} (")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["tests/nowhere", "--to", "w8a8"], ["tests/nowhere", "folder not found"]),
        ([str(TINY / "gguf" / "tiny-f16.gguf"), "--to", "w8a8"], ["tiny-f16.gguf", "'--to'", "a GGUF file"]),
        ([str(TINY / "hf"), "--to", "w3a5"], ["'--to'", "unknown type(s) w3a5", "w8a8, w4a16, gptq"]),
        ([str(TINY / "hf"), "--to", "q8_0"], [str(TINY / "hf"), "'--to'", "made from a .gguf file"]),
        ([str(TINY / "hf"), "--to", "w4a16", "--group-size", "0"], ["'--group-size'", "positive"]),
        ([str(TINY / "quant" / "tiny-w8a8"), "--to", "w4a16"], ["config.json", "already quantized"]),
    ],
)
def test_bad_quantize_input_is_one_line(tmp_path, quantized, args, needles):
    proc = run_cli("quantize", *args, "--out", str(tmp_path))
    assert proc.returncode == 2
    assert_one_line_error(proc, *needles)
    assert list(tmp_path.iterdir()) == []


def test_gpu_check_without_a_gpu_says_so_in_one_line(tmp_path):
    pytest.importorskip("torch")  # it asks torch for the GPU (the `hf` extra); without torch it says so instead
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=TINY.parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1 and proc.stdout.startswith("gpu_check: no CUDA GPU here"), proc.stdout


@pytest.mark.bench  # the GPU rehearsal script's CPU run, its own vLLM process: make test-bench
def test_gpu_check_cpu_quick_runs_each_scheme(tmp_path, quantized):
    import subprocess
    import sys

    if (no_int4 := int4_kernel_problem()) is not None:
        pytest.skip(f"the rehearsal runs w4a16 on vLLM's CPU build, which here cannot: {no_int4}")

    proc = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--cpu-quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=TINY.parents[1],
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [x.split(" | ") for x in proc.stdout.splitlines() if x.startswith("| vllm.")]
    assert [(r[0], r[1]) for r in rows] == [
        (f"| vllm.{s}", f"jbeqa.0shot.{m}") for s in ("bf16", "w8a8", "w4a16") for m in ("constrained", "logprob")
    ]
    assert rows[0][4].startswith("0/40 ") and all(r[4].endswith("%)") for r in rows)  # flips against BF16
    assert "m.vllm.w8a8.ctx2048 vs m.vllm.bf16.ctx2048, jbeqa.0shot.constrained accuracy" in proc.stdout


def test_int4_answers_of_vllms_w4a8_path_get_their_own_store_key(quantized, monkeypatch):
    """With AMX, vLLM's CPU default runs int4 weights as W4A8 (activations rounded too): other answers than the
    W4A16 offline-eval runs, so a store filled under W4A8 must not serve a W4A16 sweep. Other loads keep their key."""
    import torch

    from offline_eval.inference.backends.registry import spec_fingerprint
    from offline_eval.inference.backends.spec import LoadSpec

    def keys() -> dict[str, str]:
        paths = {"bf16": TINY / "hf", **{s: quantized / f"tiny-{s}" for s in SCHEMES}}
        return {s: spec_fingerprint(LoadSpec(name="t", backend="vllm", path=str(p))) for s, p in paths.items()}

    monkeypatch.delenv("VLLM_CPU_INT4_W4A8", raising=False)
    w4a16 = keys()
    monkeypatch.setenv("VLLM_CPU_INT4_W4A8", "1")  # the user asks for vLLM's W4A8
    w4a8 = keys()
    amx = bool(torch.cpu._is_amx_tile_supported())
    assert w4a8["bf16"] == w4a16["bf16"] and w4a8["w8a8"] == w4a16["w8a8"]
    for s in ("w4a16", "gptq", "awq"):
        assert (w4a8[s] != w4a16[s]) == amx, s  # without AMX both settings run the same W4A16 kernel


def test_a_rebuild_keys_an_int4_load_by_the_kernel_the_sweep_ran(quantized, monkeypatch):
    """verify of a folder swept with VLLM_CPU_INT4_W4A8=1, run without it, looked for W4A16's keys and said the store
    lacked the answers (issue 62, item 16): a rebuild takes the kernel from the provenance (engine_start's
    int4_kernel, through the pins), whatever its own environment, or its processor, would choose."""
    from offline_eval.inference.backends.registry import spec_fingerprint
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.backends.vllm.quantized import W4A8, W4A16_AMX
    from offline_eval.modelfiles.fingerprint import Pins, pinned

    folder = str((quantized / "tiny-w4a16").resolve())
    spec = LoadSpec(name="t", backend="vllm", path=folder)
    monkeypatch.delenv("VLLM_CPU_INT4_W4A8", raising=False)
    here = spec_fingerprint(spec)
    with pinned(Pins(int4={folder: W4A8})):
        w4a8 = spec_fingerprint(spec)
    with pinned(Pins(int4={folder: W4A16_AMX})):
        w4a16 = spec_fingerprint(spec)
    monkeypatch.setenv("VLLM_CPU_INT4_W4A8", "1")
    with pinned(Pins(int4={folder: W4A16_AMX})):
        assert spec_fingerprint(spec) == w4a16  # the auditor's environment does not count
    assert w4a8 != w4a16
    assert here in (w4a8, w4a16)  # this machine's own choice is one of the two
