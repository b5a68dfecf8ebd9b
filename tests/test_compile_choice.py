"""vLLM compiles or starts eager from the work planned on its load (issue 33): the rule, the options that override
it, and the planned count an engine is handed, which is the count `sweep --dry-run` prints for the load. No engine
starts here: the rule is ours, and the engine test (test_compile_cache) checks what vLLM then does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import DATA

import offline_eval
from offline_eval.inference.backends.fake_backend import FakeBackend
from offline_eval.inference.backends.lazy import LazyBackend
from offline_eval.inference.backends.registry import spec_fingerprint
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.backends.vllm.cache import CompiledIndex
from offline_eval.inference.backends.vllm.options import (
    COMPILE_ABOVE_TOKENS,
    COMPILE_ABOVE_TOKENS_CACHED,
    compile_choice,
)
from offline_eval.pipeline.config import parse_config
from offline_eval.runtime.errors import InputError


def spec(planned: int | None = None, path: str = "/nowhere", **kw: Any) -> LoadSpec:
    return LoadSpec(name="m", backend="vllm", path=path, planned_prompt_tokens=planned, **kw)


@pytest.mark.parametrize(
    ("kw", "on_cpu", "cached", "eager", "why"),
    [
        ({}, True, False, False, "compile: auto, no planned work given"),
        ({"planned": COMPILE_ABOVE_TOKENS - 1}, True, False, True, "< 1,300,000 (the compiled model is not in the"),
        ({"planned": COMPILE_ABOVE_TOKENS}, True, False, False, ">= 1,300,000 (the compiled model is not in the"),
        ({"planned": COMPILE_ABOVE_TOKENS_CACHED - 1}, True, True, True, "< 250,000 (the compiled model is in the"),
        ({"planned": COMPILE_ABOVE_TOKENS_CACHED}, True, True, False, ">= 250,000 (the compiled model is in the"),
        ({"planned": 10}, False, False, False, "compile: auto, on a GPU"),
        ({"planned": 10, "engine_options": {"compile": "always"}}, True, False, False, "compile: always"),
        ({"planned": 10**9, "engine_options": {"compile": "never"}}, False, True, True, "compile: never"),
        (
            {"planned": 500, "engine_options": {"compile_above_tokens": 400}},
            True,
            False,
            False,
            "500 prompt tokens planned >= 400 (compile_above_tokens)",
        ),
        (
            {"planned": 10**6, "engine_options": {"compile_above_tokens": 2 * 10**6}},
            True,
            True,
            True,
            "< 2,000,000 (compile_above_tokens)",
        ),
        ({"planned": 10, "engine_args": {"enforce_eager": False}}, True, False, False, "engine_args.enforce_eager"),
        ({"planned": 10**9, "engine_args": {"enforce_eager": True}}, True, True, True, "engine_args.enforce_eager"),
    ],
)
def test_the_rule(kw: dict[str, Any], on_cpu: bool, cached: bool, eager: bool, why: str) -> None:
    planned = kw.pop("planned", None)
    got = compile_choice(spec(planned, **kw), on_cpu, cached)
    assert got[0] is eager and why in got[1], got


def test_the_index_holds_what_a_compile_saved_while_the_file_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files a compiled load added, or the file it loaded, name the model vLLM keys it on; the index finds it for
    the same engine arguments (another seed included: it does not change the traced graph), not for others, not
    once the model's config.json changes or the file is deleted, and not with vLLM's AOT cache off. Anything it
    cannot read or key counts as not compiled."""
    pytest.importorskip("vllm")
    from vllm import envs

    envs.disable_envs_cache()
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"layers": 2}')
    root = tmp_path / "cache"
    index = CompiledIndex(root)
    args = {"model": str(model), "max_model_len": 1024, "seed": 0, "enforce_eager": False}
    key, other = CompiledIndex.key(args), CompiledIndex.key({**args, "max_model_len": 2048})
    assert key is not None and other is not None and key != other
    assert not index.holds(key)
    aot = root / "torch_compile_cache" / "torch_aot_compile"
    saved, saved2 = aot / "abc" / "rank_0_0" / "model", aot / "def" / "rank_0_0" / "model"
    for f in (saved, saved2):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"x")
    index.record(key, [str(aot / "abc" / "inductor_cache" / "k.so"), str(saved)])
    assert index.holds(key) and index.holds(CompiledIndex.key({**args, "seed": 3, "enforce_eager": True}))
    assert not index.holds(other)
    index.record(other, [str(tmp_path / "elsewhere" / "model")])  # not a model in the cache: no entry
    assert not index.holds(other)
    index.record(other, [str(saved2)])  # a second key keeps the first
    assert index.holds(key) and index.holds(other)
    monkeypatch.setenv("VLLM_USE_AOT_COMPILE", "0")
    envs.disable_envs_cache()
    assert not index.holds(key)  # vLLM would not load it
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE")
    envs.disable_envs_cache()
    (model / "config.json").write_text('{"layers": 3}')  # another model at the same path
    assert CompiledIndex.key(args) != key
    (model / "config.json").write_text('{"layers": 2}')
    saved.unlink()
    assert not index.holds(key)
    saved.write_bytes(b"x")
    for bad in ("not a path\x00", str(tmp_path / "m" / "config.json"), "../../m/config.json", ""):
        (index.folder / key).write_text(bad)
        assert not index.holds(key), bad  # only a compiled model file in the cache's AOT folder counts
    assert CompiledIndex.key({**args, 1: "mixed key types"}) is None  # type: ignore[dict-item]
    assert not index.holds(None)
    index.record(key, [str(saved)])
    assert index.holds(key)


def test_the_choice_is_not_in_the_store_key_but_enforce_eager_is(tmp_path: Path) -> None:
    """How the load starts changes its speed, not the model, as batch size does; the user's own enforce_eager keeps
    the key it always had."""
    (tmp_path / "config.json").write_text("{}")
    at = str(tmp_path)
    base = spec_fingerprint(spec(path=at))
    assert spec_fingerprint(spec(12_345, at, engine_options={"compile": "never", "compile_above_tokens": 7})) == base
    assert spec_fingerprint(spec(path=at, engine_args={"enforce_eager": True})) != base
    assert "planned_prompt_tokens" not in spec(5).describe()  # nor in the provenance's load options


def test_only_an_engine_that_plans_its_start_is_counted_for(tmp_path: Path) -> None:
    calls: list[int] = []

    def plan() -> int:
        calls.append(1)
        return 321

    got: list[LoadSpec] = []
    weights = tmp_path / "w"
    weights.write_text("x")
    fake = LazyBackend(LoadSpec(name="m", backend="fake", path=str(weights)), load=got.append, plan=plan)  # type: ignore[arg-type]
    fake.get()
    assert calls == [] and got[0].planned_prompt_tokens is None
    planning = LazyBackend(spec(path=str(weights)), load=got.append, plan=plan)  # type: ignore[arg-type]
    planning.get()
    assert calls == [1] and got[1].planned_prompt_tokens == 321
    assert planning.spec.planned_prompt_tokens is None  # the lazy engine's own spec, and its key, are untouched


def test_the_options_are_checked_and_a_config_without_them_reads_as_before(tmp_path: Path) -> None:
    model = {"name": "m", "backend": "vllm", "path": str(tmp_path)}
    cfg = parse_config(
        {"models": [model], "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA)}}},
        tmp_path,
        "models.yaml",
    )
    dumped = cfg.model_dump(mode="json")["models"][0]
    assert "compile" not in dumped and "compile_above_tokens" not in dumped  # the config's digest is unchanged
    cfg = parse_config(
        {
            "models": [{**model, "compile": "never"}],
            "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA)}},
        },
        tmp_path,
        "models.yaml",
    )
    assert cfg.model_dump(mode="json")["models"][0]["compile"] == "never"
    for bad, why in (
        ({"compile": "sometimes"}, "'auto', 'always' or 'never'"),
        ({"compile_above_tokens": -1}, "greater than or equal to 0"),
    ):
        with pytest.raises(InputError) as e:
            parse_config(
                {"models": [{**model, **bad}], "tasks": {"jbeqa": {"protocol": "offline-eval"}}},
                tmp_path,
                "models.yaml",
            )
        assert f"models.yaml, field 'models.0.{next(iter(bad))}'" in str(e.value) and why in str(e.value), e.value


def test_the_planned_count_is_the_dry_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep hands a planning engine the prompt tokens its load's settings submit, every sample counted: for a few prompts, what the
    dry run prints for the load. The engine's start line reaches the sweep's log."""
    monkeypatch.setattr(FakeBackend, "plans_start", True)
    monkeypatch.setattr(FakeBackend, "start_line", lambda self: f"planned {self.spec.planned_prompt_tokens}")
    weights = tmp_path / "w"
    weights.write_text("x")
    config = {
        "output_dir": str(tmp_path / "out"),
        "models": [{"name": "m", "backend": "fake", "path": str(weights), "max_model_len": 4096}],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(DATA),
                "shots": [0, 2],
                "mode": ["constrained"],
                "limit": 6,
            }
        },
    }
    planned: list[str] = []
    offline_eval.sweep(config, progress=False, log=planned.append, dry_run=True)
    total = int(next(x for x in planned if x.startswith("total:")).split(", ")[1].split()[0])
    lines: list[str] = []
    offline_eval.sweep(config, progress=False, log=lines.append)
    assert total > 0 and f"[m.fake.default.ctx4096] planned {total}" in lines, lines


def test_a_large_setting_is_estimated_from_a_sample(tmp_path: Path) -> None:
    """Past `sample` prompts a setting is estimated from evenly spaced ones: close to the dry run's count (within 10%
    here, from 5 prompts of each setting; 0.3% on the full JBE-QA from 256), exact where the sample is the whole."""
    from offline_eval.pipeline.dryrun import phase_plans, planned_tokens
    from offline_eval.pipeline.plan import plan

    weights = tmp_path / "w"
    weights.write_text("x")
    raw = {
        "models": [{"name": "m", "backend": "fake", "path": str(weights), "max_model_len": 8192}],
        "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0, 2], "mode": ["constrained"]}},
    }
    the = plan(parse_config(raw, tmp_path, "models.yaml"), "models.yaml", None, None, None)
    ld = the.loads[0]
    exact = sum(p.prompt_tokens or 0 for p in phase_plans([ld], the.tasks))
    assert all(len(s.phase.requests) > 20 for t in the.tasks for s in t.settings)
    assert planned_tokens(ld, the.tasks) == exact
    assert abs(planned_tokens(ld, the.tasks, sample=5) - exact) / exact < 0.10  # type: ignore[operator]


def test_piecewise_is_tried_only_where_it_was_proven() -> None:
    """One process, an unquantized model, no fusion pass (several are imported only on CUDA or XPU) and vLLM's own
    splitting ops; anything else keeps vLLM's whole graph. Every flag of vLLM's own PassConfig but eliminate_noops
    turns a pass on, so each of them, set, must keep the whole graph: a flag vLLM adds under another name fails here."""
    import copy
    import dataclasses
    from types import SimpleNamespace as NS

    pytest.importorskip("vllm")
    from vllm.config.compilation import PassConfig

    from offline_eval.inference.backends.vllm.patches import _proven

    def config(passes: Any = None, **over: Any) -> tuple[Any, Any]:
        c = NS(
            parallel_config=NS(
                world_size=over.pop("world_size", 1), distributed_executor_backend=over.pop("ex", "uni")
            ),
            model_config=NS(quantization=over.pop("quantization", None)),
            quant_config=over.pop("quant_config", None),
            compilation_config=NS(pass_config=passes or PassConfig()),
        )
        return c, over.pop("splits", None)

    assert _proven(*config())
    assert not _proven(*config(world_size=2))
    assert not _proven(*config(ex="mp"))  # the engine core in a process of its own, unpatched
    assert not _proven(*config(quantization="fp8"))
    assert not _proven(*config(quant_config=object()))
    assert not _proven(*config(splits=[]))
    flags = [f.name for f in dataclasses.fields(PassConfig) if f.type in (bool, "bool") and f.name != "eliminate_noops"]
    assert len(flags) >= 8, flags
    for flag in flags:
        passes = copy.copy(PassConfig())
        object.__setattr__(passes, flag, True)  # as set: the CPU's own validation would turn some off
        assert not _proven(*config(passes)), flag
