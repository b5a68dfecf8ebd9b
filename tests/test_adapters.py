"""LoRA adapters as variants, our own logic on hand-made files: the PEFT folder read and checked against the base's
shapes, each problem one line naming the file and the field; the store key and the provenance; the refusal on a
served model; and the GGUF converter's layout against llama.cpp's rules (the engines run in test_adapter_engines)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from offline_eval.runtime.errors import InputError

safetensors_numpy = pytest.importorskip("safetensors.numpy")

HIDDEN, KV, RANK = 16, 8, 4
LAYER = "model.layers.0.self_attn"
BASE_SHAPES = {
    f"{LAYER}.q_proj.weight": [HIDDEN, HIDDEN],
    f"{LAYER}.k_proj.weight": [KV, HIDDEN],
    f"{LAYER}.v_proj.weight": [KV, HIDDEN],
    "model.embed_tokens.weight": [32, HIDDEN],
}


def write_base(folder: Path, shapes: dict[str, list[int]] = BASE_SHAPES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": HIDDEN}))
    safetensors_numpy.save_file(
        {k: np.zeros(v, np.float32) for k, v in shapes.items()}, str(folder / "model.safetensors")
    )
    return folder


def write_peft(folder: Path, modules: dict[str, int] | None = None, rank: int = RANK, seed: int = 0, **cfg) -> Path:  # type: ignore[no-untyped-def]
    """A PEFT folder: module -> its output size, every input HIDDEN wide; lora_B not zero."""
    modules = modules if modules is not None else {f"{LAYER}.q_proj": HIDDEN, f"{LAYER}.k_proj": KV}
    rng = np.random.default_rng(seed)
    tensors = {}
    for m, out in modules.items():
        tensors[f"base_model.model.{m}.lora_A.weight"] = rng.normal(size=(rank, HIDDEN)).astype(np.float32)
        tensors[f"base_model.model.{m}.lora_B.weight"] = rng.normal(size=(out, rank)).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    safetensors_numpy.save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": 2 * rank,
        "target_modules": sorted({m.rsplit(".", 1)[-1] for m in modules}),
        "base_model_name_or_path": "base",
        "bias": "none",
        **cfg,
    }
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def test_a_peft_folder_is_read_with_its_shapes(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import read_peft

    a = read_peft(write_peft(tmp_path / "a"))
    assert (a.rank, a.alpha, a.scaling, a.base) == (RANK, 2.0 * RANK, 2.0, "base")
    assert a.targets == ("k_proj", "q_proj")
    assert a.modules == {
        f"{LAYER}.q_proj": ([RANK, HIDDEN], [HIDDEN, RANK]),
        f"{LAYER}.k_proj": ([RANK, HIDDEN], [KV, RANK]),
    }
    assert read_peft(write_peft(tmp_path / "rs", use_rslora=True)).scaling == pytest.approx(2 * RANK / RANK**0.5)


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"peft_type": "IA3"}, "peft_type", "only LoRA"),
        ({"use_dora": True}, "use_dora", "DoRA"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save", "replace whole modules"),
        ({"bias": "all"}, "bias", "biases"),
        ({"r": "eight"}, "r", "positive integer"),
        ({"r": 0}, "r", "positive integer"),
        ({"lora_alpha": "16"}, "lora_alpha", "must be a positive number"),
        ({"lora_alpha": float("nan")}, "lora_alpha", "must be a positive number"),
        ({"lora_alpha": 0}, "lora_alpha", "must be a positive number"),
        ({"use_rslora": "false"}, "use_rslora", "true or false"),
        ({"target_modules": 5}, "target_modules", "a module name or a list"),
        ({"base_model_name_or_path": 7}, "base_model_name_or_path", "must be a string"),
        ({"alpha_pattern": {"q_proj": 4}}, "alpha_pattern", "per-module"),
        ({"rank_pattern": {"q_proj": 2}}, "rank_pattern", "per-module"),
    ],
)
def test_a_config_the_engines_cannot_run_names_its_field(tmp_path, change, field, words):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import read_peft

    folder = write_peft(tmp_path / "a", **change)
    with pytest.raises(InputError) as e:
        read_peft(folder)
    assert (
        str(folder / "adapter_config.json") in str(e.value) and f"'{field}'" in str(e.value) and words in str(e.value)
    )


def test_broken_folders_name_the_file(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import read_peft

    gguf = tmp_path / "a.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(InputError, match="llama.cpp's; this engine reads a PEFT folder"):
        read_peft(gguf)
    folder = write_peft(tmp_path / "a")
    (folder / "adapter_model.safetensors").unlink()
    with pytest.raises(InputError, match="adapter_model.safetensors is missing"):
        read_peft(folder)
    mismatched = write_peft(tmp_path / "b", rank=4)
    cfg = json.loads((mismatched / "adapter_config.json").read_text())
    (mismatched / "adapter_config.json").write_text(json.dumps({**cfg, "r": 8}))
    with pytest.raises(InputError) as e:
        read_peft(mismatched)
    assert "adapter_model.safetensors" in str(e.value) and "rank-8 pair" in str(e.value) and LAYER in str(e.value)
    odd = tmp_path / "c"
    odd.mkdir()
    safetensors_numpy.save_file(
        {"lm_head.weight": np.zeros((2, 2), np.float32)}, str(odd / "adapter_model.safetensors")
    )
    (odd / "adapter_config.json").write_text(json.dumps({"r": 2}))
    with pytest.raises(InputError, match="'lm_head.weight': not a LoRA tensor"):
        read_peft(odd)


def test_an_adapter_is_checked_against_the_base_shapes(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import peft_fit_problem, read_peft

    base = write_base(tmp_path / "base")
    assert peft_fit_problem(read_peft(write_peft(tmp_path / "fits")), base) is None
    lacking = peft_fit_problem(read_peft(write_peft(tmp_path / "o", {f"{LAYER}.o_proj": HIDDEN})), base)
    assert lacking is not None and f"has no module {LAYER}.o_proj" in lacking and "adapter_model.safetensors" in lacking
    wide = peft_fit_problem(read_peft(write_peft(tmp_path / "w", {f"{LAYER}.k_proj": HIDDEN})), base)
    assert wide is not None and f"maps {HIDDEN} -> {HIDDEN}" in wide and f"[{KV}, {HIDDEN}]" in wide
    # a packed int4 base (compressed-tensors) is checked on its output size
    packed = write_base(tmp_path / "packed", {f"{LAYER}.q_proj.weight_packed": [HIDDEN, HIDDEN // 8]})
    assert peft_fit_problem(read_peft(write_peft(tmp_path / "q", {f"{LAYER}.q_proj": HIDDEN})), packed) is None


def test_the_base_named_in_the_adapter_is_a_warning(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import base_mismatch, read_peft

    base = write_base(tmp_path / "base")
    assert base_mismatch(read_peft(write_peft(tmp_path / "a", base_model_name_or_path="org/base")), base) is None
    said = base_mismatch(read_peft(write_peft(tmp_path / "b", base_model_name_or_path="org/other-7b")), base)
    assert said is not None and "'org/other-7b'" in said and "so it runs" in said


def _spec(base: Path, adapter: Path | None, scale: float = 1.0):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.spec import LoadSpec

    return LoadSpec(
        name="m", backend="transformers", path=str(base), max_model_len=512,
        adapter=None if adapter is None else str(adapter), adapter_scale=scale,
    )  # fmt: skip


def test_the_store_key_follows_every_byte_of_the_adapter_and_its_scale(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.registry import spec_fingerprint

    base, adapter = write_base(tmp_path / "base"), write_peft(tmp_path / "a")
    without = _spec(base, None)
    assert "adapter" not in without.describe() and "adapter_scale" not in without.describe()
    keys = {"none": spec_fingerprint(without), "a": spec_fingerprint(_spec(base, adapter))}
    keys["scale"] = spec_fingerprint(_spec(base, adapter, 0.5))
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    for f in adapter.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert spec_fingerprint(_spec(base, copy)) == keys["a"]  # the files, not where they are
    weights = bytearray((adapter / "adapter_model.safetensors").read_bytes())
    weights[-1] ^= 1
    (adapter / "adapter_model.safetensors").write_bytes(bytes(weights))
    keys["byte"] = spec_fingerprint(_spec(base, adapter))
    cfg = json.loads((copy / "adapter_config.json").read_text())
    (copy / "adapter_config.json").write_text(json.dumps({**cfg, "lora_alpha": 1}))
    keys["config"] = spec_fingerprint(_spec(base, copy))
    assert len(set(keys.values())) == len(keys), keys


def test_the_provenance_describes_the_adapter(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.provenance import adapter_record

    adapter = write_peft(tmp_path / "a")
    base = write_base(tmp_path / "base")
    rec = adapter_record(str(adapter), 0.5, str(base), None)
    assert rec["format"] == "peft" and rec["rank"] == RANK and rec["scale"] == 0.5
    assert rec["target_modules"] == ["k_proj", "q_proj"] and rec["base_model_name_or_path"] == "base"
    assert rec["path"] == str(adapter.resolve()) and len(rec["digest"]) == 64 and "base_mismatch" not in rec
    other = adapter_record(
        str(write_peft(tmp_path / "o", base_model_name_or_path="org/other-7b")), 1.0, str(base), None
    )
    assert "'org/other-7b'" in other["base_mismatch"]


def _config(tmp_path: Path, model: dict) -> str:
    p = tmp_path / "models.yaml"
    tasks = {"jbeqa": {"protocol": "offline-eval", "data": str(tmp_path)}}
    p.write_text(yaml.safe_dump({"models": [model], "tasks": tasks}), encoding="utf-8")
    return str(p)


def test_an_adapter_on_a_served_model_is_refused_in_one_line(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.config import load_config

    model = {"name": "s", "backend": "openai", "model": "m", "base_url": "http://h:1/v1"}
    with pytest.raises(InputError) as e:
        load_config(_config(tmp_path, {**model, "variants": {"ft": {"adapter": "a"}}}))
    assert "variants.ft.adapter" in str(e.value) and "--enable-lora --lora-modules" in str(e.value)


@pytest.mark.parametrize("scale", [0, -1])
def test_the_scale_is_positive(tmp_path, scale):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.config import load_config

    model = {
        "name": "m",
        "backend": "transformers",
        "path": "p",
        "variants": {"ft": {"adapter": "a", "adapter_scale": scale}},
    }
    with pytest.raises(InputError, match="adapter_scale"):
        load_config(_config(tmp_path, model))


def test_an_adapter_path_is_checked_before_the_sweep(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.pipeline.config import check_paths, load_config

    base = write_base(tmp_path / "base")
    write_peft(tmp_path / "good")
    write_peft(tmp_path / "alien", {f"{LAYER}.o_proj": HIDDEN})
    gguf = tmp_path / "a.gguf"
    gguf.write_bytes(b"GGUF")
    variants = {"ok": {"adapter": "good"}, "gone": {"adapter": "missing"}, "alien": {"adapter": "alien"},
                "gguf": {"adapter": "a.gguf"}}  # fmt: skip
    path = _config(tmp_path, {"name": "m", "backend": "transformers", "path": str(base), "variants": variants})
    cfg = load_config(path)
    assert cfg.models[0].variants["gone"].adapter == str(tmp_path / "missing")  # relative to the config
    problems = check_paths(cfg, path)
    by = {v: [p for p in problems if f"variants.{v}.adapter" in p or f"{tmp_path / v}" in p] for v in variants}
    assert not by["ok"] and len(problems) == 3, problems
    assert any("path does not exist" in p for p in by["gone"])
    assert any("has no module" in p for p in by["alien"])
    assert any("llama.cpp's; this engine reads a PEFT folder" in p for p in problems)


# llama.cpp's own layout, for a llama base: its q/k rows interleaved as convert_hf_to_gguf.py writes them
HEADS, KV_HEADS = 4, 2


def _base_gguf(path: Path, hidden: int = HIDDEN, arch: str = "llama") -> Path:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    kv = hidden // HEADS * KV_HEADS
    for name, shape in {"attn_q": (hidden, hidden), "attn_k": (kv, hidden), "attn_v": (kv, hidden)}.items():
        w.add_tensor(f"blk.0.{name}.weight", np.zeros(shape, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _interleave(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute, as written there."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_the_gguf_adapter_is_in_llama_cpps_layout(tmp_path):  # type: ignore[no-untyped-def]
    gguf = pytest.importorskip("gguf")
    from safetensors.numpy import load_file

    from offline_eval.modelfiles.peft import describe_adapter, gguf_adapter_problem, gguf_field
    from offline_eval.models.adapter_gguf import peft_to_gguf

    base = _base_gguf(tmp_path / "base.gguf")
    folder = write_peft(tmp_path / "a", {f"{LAYER}.q_proj": HIDDEN, f"{LAYER}.k_proj": KV, f"{LAYER}.v_proj": KV})
    out = peft_to_gguf(str(folder), str(base))
    assert out == tmp_path / "a.gguf" and not list(tmp_path.glob(".*part"))
    r = gguf.GGUFReader(str(out))
    assert gguf_field(r, "general.type") == "adapter" and gguf_field(r, "adapter.type") == "lora"
    assert gguf_field(r, "adapter.lora.alpha") == 2 * RANK and gguf_field(r, "general.architecture") == "llama"
    got = {t.name: np.array(t.data).reshape([int(x) for x in reversed(t.shape)]) for t in r.tensors}
    peft = load_file(str(folder / "adapter_model.safetensors"))
    for hf, ll, heads in (("q_proj", "attn_q", HEADS), ("k_proj", "attn_k", KV_HEADS), ("v_proj", "attn_v", None)):
        a, b = (
            peft[f"base_model.model.{LAYER}.{hf}.lora_A.weight"],
            peft[f"base_model.model.{LAYER}.{hf}.lora_B.weight"],
        )
        np.testing.assert_array_equal(got[f"blk.0.{ll}.weight.lora_a"], a)
        # the update B·A lands on the base's rows where the converter put them
        want = (b @ a) if heads is None else _interleave(b @ a, heads)
        np.testing.assert_allclose(got[f"blk.0.{ll}.weight.lora_b"] @ a, want, rtol=1e-6, atol=1e-6)
    assert gguf_adapter_problem(out, base) is None
    assert (
        describe_adapter(out)["target_modules"] == ["attn_k", "attn_q", "attn_v"]
        and describe_adapter(out)["rank"] == RANK
    )
    other = _base_gguf(tmp_path / "wide.gguf", hidden=2 * HIDDEN)
    problem = gguf_adapter_problem(out, other)
    assert problem is not None and "blk.0.attn_k.weight" in problem and "do not fit" in problem
    said = gguf_adapter_problem(folder, base)
    assert said is not None and "offline-eval adapter gguf" in said
    assert "not a GGUF LoRA adapter" in str(gguf_adapter_problem(base, base))


def test_rslora_alpha_carries_into_llama_cpps_scale(tmp_path):  # type: ignore[no-untyped-def]
    gguf = pytest.importorskip("gguf")
    from offline_eval.modelfiles.peft import gguf_field
    from offline_eval.models.adapter_gguf import peft_to_gguf

    out = peft_to_gguf(str(write_peft(tmp_path / "a", use_rslora=True)), str(_base_gguf(tmp_path / "b.gguf")))
    # llama.cpp scales by alpha / r; PEFT's rsLoRA by alpha / sqrt(r)
    assert gguf_field(gguf.GGUFReader(str(out)), "adapter.lora.alpha") / RANK == pytest.approx(2 * RANK / RANK**0.5)


def test_the_converter_refuses_what_it_cannot_write(tmp_path):  # type: ignore[no-untyped-def]
    pytest.importorskip("gguf")
    from offline_eval.models.adapter_gguf import peft_to_gguf

    with pytest.raises(InputError, match="general.architecture"):
        peft_to_gguf(str(write_peft(tmp_path / "a")), str(_base_gguf(tmp_path / "m.gguf", arch="mamba")))
    with pytest.raises(InputError, match="has no tensor for"):
        peft_to_gguf(str(write_peft(tmp_path / "o", {f"{LAYER}.o_proj": HIDDEN})), str(_base_gguf(tmp_path / "b.gguf")))
    assert not list(tmp_path.glob("*.gguf.*")) and not (tmp_path / "o.gguf").exists()


def test_an_adapter_variant_knows_its_base_and_its_siblings():  # type: ignore[no-untyped-def]
    from offline_eval.models.adapter_pairs import adapter_base, adapter_group, adapter_on_own_weights
    from offline_eval.models.spec import ModelSpec

    m = ModelSpec.model_validate(
        {"name": "m", "backend": "vllm", "path": "/w", "variants": {
            "bf16": {}, "a": {"adapter": "/a"}, "b": {"adapter": "/b"}, "a-half": {"adapter": "/a", "adapter_scale": 0.5},
            "w4": {"file": "/w4"}, "w4-a": {"file": "/w4", "adapter": "/a"}, "w8-a": {"file": "/w8", "adapter": "/a"},
            "fp32-a": {"dtype": "float32", "adapter": "/a"}}})  # fmt: skip
    v = m.variants
    assert adapter_group(v, "a") == ("/a", "/b", "/a") and adapter_group(v, "bf16") == ()
    assert adapter_group(v, "w4-a") == ("/a",) and adapter_group(v, "fp32-a") == ("/a",)
    assert m.load_spec("b").adapter_group == ("/a", "/b", "/a")
    assert [adapter_base(v, k) for k in ("a", "w4-a", "w8-a", "fp32-a", "bf16")] == ["bf16", "w4", None, None, None]
    assert [adapter_on_own_weights(v, k) for k in ("w4-a", "w8-a", "a", "fp32-a")] == ["a", "a", None, None]


def test_an_adapter_fits_a_gptq_or_awq_base_by_its_packed_shapes(tmp_path):  # type: ignore[no-untyped-def]
    """GPTQ's qweight is [in/8, out] and AWQ's [in, out/8] (what `offline-eval quantize --to gptq,awq` writes); an
    adapter of the model fits both, one of another width fits neither."""
    from offline_eval.modelfiles.peft import peft_fit_problem, read_peft

    mods = {f"{LAYER}.q_proj": HIDDEN, f"{LAYER}.k_proj": KV}
    gptq = write_base(tmp_path / "gptq", {f"{LAYER}.q_proj.qweight": [HIDDEN // 8, HIDDEN],
                                          f"{LAYER}.k_proj.qweight": [HIDDEN // 8, KV]})  # fmt: skip
    awq = write_base(tmp_path / "awq", {f"{LAYER}.q_proj.qweight": [HIDDEN, HIDDEN // 8],
                                        f"{LAYER}.k_proj.qweight": [HIDDEN, KV // 8]})  # fmt: skip
    ours = read_peft(write_peft(tmp_path / "a", mods))
    assert peft_fit_problem(ours, gptq) is None and peft_fit_problem(ours, awq) is None
    wide = write_base(tmp_path / "wide", {f"{LAYER}.q_proj.qweight": [HIDDEN // 8, 2 * HIDDEN],
                                          f"{LAYER}.k_proj.qweight": [HIDDEN // 8, 2 * KV]})  # fmt: skip
    assert "trained on another model" in str(peft_fit_problem(ours, wide))


def test_a_peft_key_of_another_form_is_named(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.modelfiles.peft import read_peft

    folder = write_peft(tmp_path / "a")
    tensors = safetensors_numpy.load_file(str(folder / "adapter_model.safetensors"))
    renamed = {k.replace(".lora_A.weight", ".lora_A.default.weight"): v for k, v in tensors.items()}
    safetensors_numpy.save_file(renamed, str(folder / "adapter_model.safetensors"))
    with pytest.raises(InputError, match="not a LoRA tensor"):
        read_peft(folder)
