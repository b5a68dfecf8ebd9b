"""The constraint backend a model names: the one-line refusals, what `auto` resolves to on each engine, the store key
(unchanged where the engine's default runs), the dumped config and the provenance; and outlines-core's regex for our
schemas (the engines run in test_constraint_engines)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import DATA, TINY, run_cli
from pydantic import ValidationError

from offline_eval.inference.backends.registry import get_engine, spec_fingerprint
from offline_eval.inference.constrained.libraries import NAMES, backend_problem, normalized, resolved
from offline_eval.models.spec import ModelSpec


def model(**kw):  # type: ignore[no-untyped-def]
    return ModelSpec.model_validate({"name": "m", "backend": "transformers", "path": str(TINY / "hf"), **kw})


def refusal(**kw) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as e:
        model(**kw)
    (err,) = e.value.errors()
    return str(err["msg"])


def test_an_unknown_backend_lists_the_valid_ones():
    msg = refusal(constraint_backend="lmformatenforcer")
    assert msg == "unknown constraint backend 'lmformatenforcer'; valid: auto, xgrammar, guidance, outlines, gbnf"


def test_a_backend_the_engine_does_not_run_says_which_it_runs_and_where_the_other_runs():
    msg = refusal(backend="llamacpp", path=str(TINY / "gguf" / "tiny-q8_0.gguf"), constraint_backend="xgrammar")
    assert msg == (
        "the llamacpp engine runs the constraint backends gbnf, guidance, outlines (gbnf is its auto); "
        "xgrammar runs on transformers, vllm"
    )
    assert "gbnf runs on llamacpp" in refusal(constraint_backend="gbnf")


def test_a_served_model_leaves_the_choice_to_its_server():
    with pytest.raises(ValidationError) as e:
        ModelSpec.model_validate({"name": "m", "backend": "openai", "base_url": "http://127.0.0.1:1/v1",
                                  "model": "x", "constraint_backend": "guidance"})  # fmt: skip
    assert "server chooses its own constraint backend" in str(e.value)
    assert "--structured-outputs-config.backend guidance" in str(e.value)


def test_a_backend_not_installed_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llguidance" else real(name, *a))
    engines = {"transformers": ("xgrammar", "guidance", "outlines")}
    assert backend_problem("transformers", "guidance", engines) == (
        "constraint backend guidance needs llguidance: pip install 'offline-eval[guidance]'"
    )


def test_auto_resolves_to_each_engines_default():
    for engine, default in (("vllm", "xgrammar"), ("transformers", "xgrammar"), ("llamacpp", "gbnf")):
        own = get_engine(engine).constraint_backends
        assert own[0] == default and set(own) <= set(NAMES)
        assert resolved(own, None) == resolved(own, "auto") == resolved(own, default) == default
        assert normalized(own, "auto") is normalized(own, default) is None
        assert resolved(own, "guidance") == normalized(own, "guidance") == "guidance"
    assert resolved(get_engine("openai").constraint_backends, None) is None


def test_the_store_key_changes_only_where_another_backend_than_the_default_runs():
    # a backend that is not installed is refused (above): each named one's library, the `hf`, `guidance` and
    # `outlines` extras; the fast tier has none
    for module in ("xgrammar", "llguidance", "outlines_core"):
        pytest.importorskip(module)
    keys = {
        name: spec_fingerprint(model(**({} if name is None else {"constraint_backend": name})).load_spec("default"))
        for name in (None, "auto", "xgrammar", "guidance", "outlines")
    }
    assert keys[None] == keys["auto"] == keys["xgrammar"]
    assert len({keys[None], keys["guidance"], keys["outlines"]}) == 3
    spec = model(constraint_backend="guidance").load_spec("default")
    assert spec.describe()["constraint_backend"] == "guidance"
    assert "constraint_backend" not in model().load_spec("default").describe()


def test_a_dumped_config_without_a_backend_is_the_config_it_was():
    pytest.importorskip("outlines_core")  # the `outlines` extra: not installed, the backend is refused
    assert "constraint_backend" not in model().model_dump()
    again = model(constraint_backend="outlines").model_dump()
    assert again["constraint_backend"] == "outlines"
    assert ModelSpec.model_validate(again) == model(constraint_backend="outlines") != model()


def test_run_refuses_an_unknown_backend_in_one_line(tmp_path):
    proc = run_cli("run", "--backend", "transformers", "--model", str(TINY / "hf"), "--task", "jbeqa", "--data",
                   str(DATA), "--constraint-backend", "xgrammer", "--out", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "constraint" in x]
    assert len(lines) == 1 and "unknown constraint backend 'xgrammer'" in lines[0] and "outlines" in lines[0]


def test_outlines_regex_keeps_our_json_form():
    pytest.importorskip("outlines_core")  # the `outlines` extra
    from offline_eval.inference.constrained.grammars import outlines_regex
    from offline_eval.inference.constraints import Choice, JsonSchema

    schema = {"type": "object", "required": ["a", "s"], "additionalProperties": False,
              "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 3}, "s": {"type": "string"}}}  # fmt: skip
    rx = re.compile(outlines_regex(JsonSchema(schema)))
    assert rx.fullmatch('{"a":2,"s":"第1条「甲」①"}')
    assert not rx.fullmatch('{"a":4,"s":"x"}')  # the bounds hold (outlines-core alone drops them)
    assert not rx.fullmatch('{"a": 2, "s": "x"}')  # no whitespace, as xgrammar and GBNF compile it
    assert not rx.fullmatch('{"a":2,"s":"a\nb"}')  # a raw control character is not JSON
    assert json.loads('{"a":2,"s":"\\"q\\" \\\\"}') and rx.fullmatch('{"a":2,"s":"\\"q\\" \\\\"}')
    choice = re.compile(outlines_regex(Choice(["0", "1", "a.b"])))
    assert choice.fullmatch("a.b") and not choice.fullmatch("axb")
