"""Issue 62, items 4 and 5: NaN weights and NaN logits never become scored answers. An adapter whose weights hold a
NaN is refused before any engine starts; a model whose logits turn NaN (broken weights, or an adapter trained so hot
that its finite weights overflow) fails its run in one line on every engine, in constrained and logprob mode alike,
nothing of it is stored, and vLLM's shared adapter engine is not handed on to the next adapter."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import DATA, run_cli, stored_rows

ADAPTER = "adapter_model.safetensors"


def _poisoned_adapter(tiny: Path, dest: Path, value: float, dtype: str = "float32") -> Path:
    """Adapter 'a' with every lora_B weight set to `value`, written back in `dtype` (safetensors' numpy writer)."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(tiny / "adapters" / "a", dest)
    tensors = load_file(dest / ADAPTER)
    for name, t in tensors.items():
        if ".lora_B." in name:
            tensors[name] = np.full_like(t, value, dtype=dtype)
        else:
            tensors[name] = t.astype(dtype)
    save_file(tensors, dest / ADAPTER)
    return dest


@pytest.mark.parametrize(("value", "dtype"), [(np.nan, "float32"), (np.inf, "float16"), (-np.inf, "float32")])
def test_an_adapter_with_non_finite_weights_is_refused_before_any_engine_starts(tmp_path, tiny, value, dtype):  # type: ignore[no-untyped-def]
    adapter = _poisoned_adapter(tiny, tmp_path / "diverged", value, dtype)
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "tv", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 1024,
                    "variants": {"diverged": {"adapter": str(adapter)}}}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"]}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    where = [str(adapter / ADAPTER), "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"]
    check = run_cli("models", "check", str(path))
    assert check.returncode == 2 and "Traceback" not in check.stderr, check.stderr[-3000:]
    plan = run_cli("sweep", "--dry-run", str(path))
    sweep = run_cli("sweep", str(path))
    assert sweep.returncode != 0 and "Traceback" not in sweep.stderr, sweep.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (failure,) = summary["failures"]
    planned = plan.stdout + plan.stderr
    for said in (check.stdout + check.stderr, planned, failure["reason"]):
        assert "NaN or infinite weights" in said and all(w in said for w in where), said[-3000:]
    assert "(will fail: " in planned
    assert "loading vllm" not in sweep.stdout + sweep.stderr  # refused before the engine starts
    assert stored_rows(tmp_path / "out" / "store.sqlite") == 0


def _nan_hf(tiny: Path, dest: Path) -> Path:
    """The tiny model with a NaN final norm: every logit NaN (torch's writer: the weights are bfloat16)."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(tiny / "hf", dest)
    weights = dest / "model.safetensors"
    sd = load_file(weights)
    sd["model.norm.weight"] = torch.full_like(sd["model.norm.weight"], float("nan"))
    save_file(sd, weights, metadata={"format": "pt"})
    return dest


def _nan_gguf(tiny: Path, dest: Path) -> Path:
    """The tiny F16 GGUF with a NaN output norm (an F32 tensor), written in place through gguf's own reader."""
    import gguf

    shutil.copy(tiny / "gguf" / "tiny-f16.gguf", dest)
    reader = gguf.GGUFReader(str(dest), "r+")
    (norm,) = [t for t in reader.tensors if t.name == "output_norm.weight"]
    norm.data[:] = np.nan
    reader.data.flush()
    del reader
    return dest


def test_nan_logits_fail_their_run_on_every_engine_and_nothing_of_it_is_stored(tmp_path, tiny):  # type: ignore[no-untyped-def]
    """One sweep: NaN weights on transformers and llama.cpp; on vLLM a 'hot' adapter (finite float32 weights that
    overflow in the model's bfloat16) shares one engine with adapter 'b', and runs first. Constrained mode would
    otherwise score the noise as answers ("0" every time, faithfulness 1.000)."""
    hot = _poisoned_adapter(tiny, tmp_path / "hot", 3e38)
    models = [
        {"name": "th", "backend": "transformers", "path": str(_nan_hf(tiny, tmp_path / "nan-hf")),
         "max_model_len": 1024, "variants": {"hf-nan": {}}},
        {"name": "tl", "backend": "llamacpp", "path": str(_nan_gguf(tiny, tmp_path / "nan.gguf")),
         "max_model_len": 1024, "variants": {"gguf-nan": {}}},
        {"name": "tv", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 1024,
         "variants": {"hot": {"adapter": str(hot)}, "b": {"adapter": str(tiny / "adapters" / "b")}}},
    ]  # fmt: skip
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": models,
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0],
                            "mode": ["constrained", "logprob", "free"], "limit": 6}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = run_cli("sweep", str(path))
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said, said[-4000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    failures = {f["run"]: f["reason"] for f in summary["failures"]}
    broken = {"th.transformers.hf-nan.ctx1024", "tl.llamacpp.gguf-nan.ctx1024", "tv.vllm.hot.ctx1024"}
    assert set(failures) == broken, failures
    for run in broken:
        assert "logits were NaN or infinite" in failures[run] and "\n" not in failures[run], failures[run]
    assert {r["run"] for r in summary["runs"]} == {"tv.vllm.b.ctx1024"}
    with sqlite3.connect(tmp_path / "out" / "store.sqlite") as db:
        stored = dict(db.execute("SELECT variant, COUNT(*) FROM outputs GROUP BY variant").fetchall())
    assert stored == {"b": 18}, stored  # 6 items x 3 modes, none of the broken runs'
    # the engine that saw NaN state served no other adapter: 'b' started its own
    assert said.count("[tv.vllm.b.ctx1024] loading vllm model") == 1, said[-4000:]
    # logprob mode on its own (above, the constrained phase failed each run first): the same three failures
    cfg["output_dir"], cfg["tasks"]["jbeqa"]["mode"] = str(tmp_path / "logprob"), ["logprob"]
    models[2]["variants"] = {"hot": {"adapter": str(hot)}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = run_cli("sweep", str(path))
    summary = json.loads((tmp_path / "logprob" / "summary.json").read_text())
    failures = {f["run"]: f["reason"] for f in summary["failures"]}
    assert set(failures) == broken and all("logits were NaN or infinite" in r for r in failures.values()), failures
    assert stored_rows(tmp_path / "logprob" / "store.sqlite") == 0
