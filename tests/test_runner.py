"""Runner + store on a real engine: dedupe, caching, --fresh, prefix order, chunk commits, overflow."""

from __future__ import annotations

import pytest
from conftest import TINY

from offline_eval.inference.backends.lazy import LazyBackend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice
from offline_eval.inference.requests import Phase, Request, Result, Sampling
from offline_eval.inference.runner import Runner
from offline_eval.inference.store import Row, Store
from offline_eval.runtime.errors import InputError


def _phase(n: int, dup: int = 0, overflow: str = "skip", long_every: int = 0) -> Phase:
    reqs = []
    for i in range(n):
        body = "長い記述。" * 400 if long_every and i % long_every == 0 else f"記述{i % (n - dup) if dup else i}"
        reqs.append(
            Request.chat(
                [{"role": "system", "content": "1か0で答えてください。"}, {"role": "user", "content": body}],
                Sampling(max_tokens=4),
                Choice(["0", "1"]),
            )
        )
    return Phase(name="t", requests=reqs, item_ids=[f"i{i}" for i in range(n)], overflow=overflow)  # type: ignore[arg-type]


@pytest.fixture()
def lazy(tiny):  # type: ignore[no-untyped-def]
    eng = LazyBackend(
        LoadSpec(name="t", backend="llamacpp", path=str(TINY / "gguf" / "tiny-q8_0.gguf"), max_model_len=512)
    )
    yield eng
    eng.close()


def test_store_round_trip(tmp_path):
    s = Store(tmp_path / "s.sqlite")
    r = Result(
        text="1",
        finish_reason="stop",
        prompt_tokens=5,
        output_tokens=2,
        latency_s=0.01,
        logprobs={"0": -2.0, "1": -0.1},
    )
    s.put_many([Row("k", "fp", "v", "{}", r)])
    assert s.get_many(["k", "missing"]) == {"k": r}
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()


def test_dedupe_cache_and_fresh(tmp_path, lazy):
    store = Store(tmp_path / "s.sqlite")
    phase = _phase(12, dup=4)  # 8 distinct prompts
    res, st = Runner(lazy, store, "v", chunk_size=3, progress=False).run(phase)
    assert st.n_generated == 8 and st.engine_calls == 3 and store.count() == 8
    assert [r.text for r in res[8:]] == [r.text for r in res[:4]]
    res2, st2 = Runner(lazy, store, "v", chunk_size=3, progress=False).run(phase)
    assert st2.n_generated == 0 and st2.n_cached == 12 and [r.text for r in res2] == [r.text for r in res]
    _, st3 = Runner(lazy, store, "v", chunk_size=3, fresh=True, progress=False).run(phase)
    assert st3.n_generated == 8 and store.count() == 8
    # Another variant name with the same weights, load options and requests computes the same: nothing again.
    _, st4 = Runner(lazy, store, "other", progress=False).run(phase)
    assert st4.n_generated == 0 and st4.n_cached == 12 and store.count() == 8
    store.close()


def test_fully_stored_phase_never_loads_the_engine(tmp_path, tiny):
    spec = LoadSpec(name="t", backend="llamacpp", path=str(TINY / "gguf" / "tiny-q8_0.gguf"), max_model_len=512)
    store = Store(tmp_path / "s.sqlite")
    first = LazyBackend(spec)
    Runner(first, store, "v", progress=False).run(_phase(4))
    assert first.loaded
    first.close()
    again = LazyBackend(spec)
    Runner(again, store, "v", progress=False).run(_phase(4))
    assert not again.loaded
    store.close()


def test_overflow_skip_and_fail(tmp_path, lazy):
    store = Store(tmp_path / "s.sqlite")
    res, st = Runner(lazy, store, "v", progress=False).run(_phase(6, long_every=3))
    assert [r.finish_reason == "overflow" for r in res] == [True, False, False, True, False, False]
    # Overflows are stored too (the key holds the context length), so a re-run starts no engine.
    assert st.n_overflow == 2 and store.count() == 5  # the two long prompts are one request
    again = LazyBackend(lazy.spec)
    res2, st2 = Runner(again, store, "v", progress=False).run(_phase(6, long_every=3))
    assert not again.loaded and st2.n_cached == 6 and [r.finish_reason for r in res2] == [r.finish_reason for r in res]
    with pytest.raises(InputError, match="record i0.*max_model_len 512"):
        Runner(lazy, store, "w", progress=False).run(_phase(6, long_every=3, overflow="fail"))
    store.close()


def test_overflow_focus_runs_the_fallback_and_remembers_it(tmp_path, lazy):
    store = Store(tmp_path / "s.sqlite")
    phase = _phase(4, long_every=2)  # items 0 and 2 are too long for 512 tokens (made distinct here)
    phase.requests[2] = Request.chat(
        [{"role": "user", "content": "別の長い記述。" * 300}], Sampling(max_tokens=4), Choice(["0", "1"])
    )
    short = Request.chat(
        [{"role": "system", "content": "1か0で答えてください。"}, {"role": "user", "content": "要約"}],
        Sampling(max_tokens=4),
        Choice(["0", "1"]),
    )
    still_long = _phase(1, long_every=1).requests[0]
    phase.overflow, phase.fallbacks = "focus", [short, None, still_long, short]
    res, st = Runner(lazy, store, "v", progress=False).run(phase)
    assert [(r.finish_reason, r.focused) for r in res][:3] == [("stop", True), ("stop", False), ("overflow", True)]
    assert res[0].text in ("0", "1") and not res[3].focused  # item 3 fits: its fallback is not used
    direct, _ = Runner(lazy, store, "v", progress=False).run(Phase("d", [short], ["s"]))
    assert direct[0].text == res[0].text and not direct[0].focused  # the fallback's own entry
    again = LazyBackend(lazy.spec)
    res2, st2 = Runner(again, store, "v", progress=False).run(phase)
    assert not again.loaded and [(r.text, r.finish_reason, r.focused) for r in res2] == [
        (r.text, r.finish_reason, r.focused) for r in res
    ]
    phase.overflow = "skip"  # the same fallbacks under 'skip' are never used
    res3, _ = Runner(lazy, store, "w", progress=False).run(phase)
    assert [r.finish_reason for r in res3] == ["overflow", "stop", "overflow", "stop"]
    # Overflows stored under 'skip' are retried under 'focus' (with the fallback) and fail again under 'fail'.
    phase.overflow = "focus"
    res4, _ = Runner(lazy, store, "w", progress=False).run(phase)
    assert [(r.finish_reason, r.focused) for r in res4][:3] == [("stop", True), ("stop", False), ("overflow", True)]
    phase.overflow, phase.fallbacks = "fail", None
    with pytest.raises(InputError, match="record i0"):
        Runner(lazy, store, "w", progress=False).run(phase)
    store.close()


def _seen_by(monkeypatch, cls) -> list[list[int]]:  # type: ignore[no-untyped-def]
    """The token ids the engine is handed, in its order (the real engine still answers)."""
    seen: list[list[int]] = []
    real = cls.generate

    def generate(self, requests, encoded=None, progress=None):  # type: ignore[no-untyped-def]
        seen.extend(encoded or self.encode(requests))
        return real(self, requests, encoded, progress)

    monkeypatch.setattr(cls, "generate", generate)
    return seen


def _varied(n: int) -> Phase:
    """Prompts whose token-id order is not their length order (a long one sorts first by its ids)."""
    reqs = [
        Request.chat(
            [{"role": "user", "content": "あいうえおかきくけこさしすせそ"[i] + "記述" * (1 + (7 * i) % n)}],
            Sampling(max_tokens=2),
            Choice(["0", "1"]),
        )
        for i in range(n)
    ]
    return Phase(name="t", requests=reqs, item_ids=[f"i{i}" for i in range(n)])


def test_a_padding_engine_gets_its_prompts_shortest_first_and_a_caching_one_by_prefix(tmp_path, lazy, monkeypatch):
    from offline_eval.inference.backends.hf.backend import HFBackend
    from offline_eval.inference.backends.llamacpp.backend import LlamaCppBackend

    phase = _varied(12)
    hf = LazyBackend(LoadSpec(name="t", backend="transformers", path=str(TINY / "hf"), max_model_len=512, batch_size=4))
    try:
        seen = _seen_by(monkeypatch, HFBackend)
        res, _ = Runner(hf, Store(tmp_path / "a.sqlite"), "v", chunk_size=5, progress=False).run(phase)
        assert len(seen) == 12 and [len(x) for x in seen] == sorted(len(x) for x in seen)
        mine = hf.get().encode(phase.requests)  # type: ignore[attr-defined]
        assert [r.prompt_tokens for r in res] == [len(x) for x in mine]  # each item its own answer
        assert sorted(mine) != sorted(mine, key=len)  # the token-id order would not have been this one
    finally:
        hf.close()
    seen = _seen_by(monkeypatch, LlamaCppBackend)
    Runner(lazy, Store(tmp_path / "b.sqlite"), "v", chunk_size=5, progress=False).run(phase)
    assert len(seen) == 12 and seen == sorted(seen) and [len(x) for x in seen] != sorted(len(x) for x in seen)
