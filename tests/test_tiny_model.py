"""scripts/make_tiny_model.py: deterministic, complete, and usable by every engine's tokenizer path."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("torch")  # the builder needs torch, transformers and gguf (the `tiny` extra)
pytestmark = pytest.mark.engine


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_build_is_deterministic_and_complete(tmp_path):
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True, capture_output=True
        )
        outs.append(_digest(out))
    assert outs[0] == outs[1]
    files = set(outs[0])
    assert {
        "hf/config.json",
        "hf/model.safetensors",
        "hf/tokenizer.model",
        "gguf/tiny-f16.gguf",
        "gguf/tiny-q8_0.gguf",
        "gguf/tiny-q4_0.gguf",
    } <= files
    cfg = json.loads((tmp_path / "a" / "hf" / "config.json").read_text())
    assert cfg["hidden_size"] // cfg["num_attention_heads"] == 64
    assert cfg["dtype" if "dtype" in cfg else "torch_dtype"] == "bfloat16"


def test_tokenizer_has_byte_fallback_and_chat_template(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "hf"))
    text = "未知の字：𠮷野家🍣 ＡＢＣ"
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text
    s = tok.apply_chat_template([{"role": "user", "content": "民法"}], tokenize=False, add_generation_prompt=True)
    assert s.startswith(tok.bos_token) and s.endswith("<|assistant|>\n")


def test_gguf_carries_the_same_tokenizer(tiny):
    from llama_cpp import Llama
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny / "hf"))
    llm = Llama(model_path=str(tiny / "gguf" / "tiny-q8_0.gguf"), verbose=False, n_ctx=256)
    text = "<s><|user|>\n第百九条の二　契約は、書面でしなければならない。</s>\n<|assistant|>\n"
    assert llm.tokenize(text.encode(), add_bos=False, special=True) == tok.encode(text, add_special_tokens=False)
    assert llm.metadata["tokenizer.chat_template"] == tok.chat_template
    llm.close()


def test_gguf_f16_computes_what_the_hf_model_computes(tiny):
    """Same weights, two engines: catches a wrong tensor layout (e.g. the q/k rotary permutation) in the GGUF."""
    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.inference.requests import Request

    reqs = [Request.chat([{"role": "user", "content": f"第{i}条の記述は正しいか。"}]) for i in range(20)]
    out = {}
    for backend, path in (("transformers", tiny / "hf"), ("llamacpp", tiny / "gguf" / "tiny-f16.gguf")):
        b = load_backend(
            LoadSpec(
                name="t",
                backend=backend,
                path=str(path),
                max_model_len=512,
                dtype="float32" if backend == "transformers" else None,
            )
        )
        out[backend] = b.choice_logprobs(reqs, ["0", "1"])
        b.close()
    for a, b in zip(out["transformers"], out["llamacpp"]):
        for c in ("0", "1"):
            assert abs(a.logprobs[c] - b.logprobs[c]) < 0.05, (a.logprobs, b.logprobs)
