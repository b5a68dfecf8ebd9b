"""The grammar is in the store key (issue 62, item 14): a constrained output is keyed by the digest of the text its
constraint library compiles, so a change to our converters, or to the library's, asks again instead of serving
answers decoded under other rules. Outputs a store holds from before the digest are served where the text compiled
then is today's, and asked again where it changed (xgrammar's bounded strings, outlines-core's escapes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from offline_eval.inference.constrained.grammars import compiled_text
from offline_eval.inference.constraints import Choice, JsonSchema
from offline_eval.inference.requests import Phase, Request, Sampling, request_json, request_key
from offline_eval.inference.runner import Runner
from offline_eval.inference.store import Store

pytestmark = pytest.mark.engine

RATIONALE = JsonSchema(
    {"type": "object", "properties": {"r": {"type": "string", "maxLength": 6}}, "required": ["r"],
     "additionalProperties": False}
)  # fmt: skip


def _phase(c: Any) -> Phase:
    greedy = Sampling(temperature=0.0, max_tokens=24)
    return Phase("p", [Request.chat([{"role": "user", "content": "理由を述べよ。"}], greedy, c)], ["i1"])


def _run(engine: Any, store: Store, c: Any) -> int:
    """How many of the phase's requests were served from the store."""
    return Runner(engine, store, "v", progress=False).run(_phase(c))[1].n_cached


def _as_before_digests(db: Path, runner: Runner, c: Any) -> None:
    """Rewrite the output's key to the one a store written before 2026-12-07 holds it under."""
    phase = _phase(c)
    rj = request_json(phase.requests[0])
    new = runner.key(phase.requests[0], rj, phase)
    old = request_key(runner.fingerprint, rj, phase.method, phase.choices)
    assert new != old
    with sqlite3.connect(db) as con:
        assert con.execute("UPDATE outputs SET key = ? WHERE key = ?", (old, new)).rowcount == 1


@pytest.mark.parametrize("constraint", [Choice(["はい", "いいえ"]), RATIONALE], ids=["choice", "bounded-json"])
def test_a_constrained_output_is_keyed_by_its_grammar(engine, tmp_path, monkeypatch, constraint):
    db = tmp_path / "store.sqlite"
    store = Store(db)
    runner = Runner(engine, store, "v", progress=False)
    assert runner.library == {"vllm": "xgrammar", "transformers": "xgrammar", "llamacpp": "gbnf"}[engine.name]
    assert _run(engine, store, constraint) == 0
    assert _run(engine, store, constraint) == 1  # the same grammar: from the store

    # an older store's output: served where the grammar compiled then is today's, asked again where it changed
    _as_before_digests(db, runner, constraint)
    changed = isinstance(constraint, JsonSchema) and runner.library == "xgrammar"
    assert _run(engine, store, constraint) == (0 if changed else 1)

    # the converter (or the library) writes another text for the same constraint: asked again
    text = compiled_text(constraint, runner.library)
    assert text
    cls = type(engine)
    monkeypatch.setattr(cls, "constraint_text", classmethod(lambda _, c, lib: text + "\n# another converter"))
    assert _run(engine, store, constraint) == 0
    monkeypatch.undo()
    assert _run(engine, store, constraint) == 1


def test_an_unconstrained_request_keeps_its_key(engine, tmp_path):
    """No grammar, no digest: every free and logprob output a store holds keeps its key."""
    phase = _phase(None)
    runner = Runner(engine, Store(tmp_path / "s.sqlite"), "v", progress=False)
    rj = request_json(phase.requests[0])
    assert runner.key(phase.requests[0], rj, phase) == request_key(runner.fingerprint, rj, phase.method, None)
