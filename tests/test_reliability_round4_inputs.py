"""Inputs that ran silently and wrong (issue 49): seeds the engines do not run as given (-1 is llama.cpp's random
seed; 2^32 runs as 0; samples past 2^32 repeat seed 0's answers), a thinking budget that leaves no item room in the
context, and thinking delimiters the model's vocabulary lacks (written into the prompt as plain text). Each is
refused in one line naming the file and the field, exit 2, before any engine starts, through the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DATA, TINY, run_cli
from hostile_server import MODEL, HostileServer

SEED_MAX = 2**32 - 1
CHECK, DRY, SWEEP = ("models", "check"), ("sweep", "--dry-run"), ("sweep",)


def _config(tmp: Path, tasks: dict[str, Any] | None = None, **model: Any) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    entry = {"name": "m", "backend": "fake", "path": str(tmp / "w.bin"), **model}
    jbeqa = {
        "protocol": "offline-eval",
        "data": str(DATA),
        "shots": [0],
        "mode": ["constrained"],
        "limit": 4,
        **(tasks or {}),
    }
    cfg = {"output_dir": str(tmp / "out"), "models": [entry], "tasks": {"jbeqa": jbeqa}}
    path = tmp / "models.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return path


def _refused(cfg: Path, field: str, *words: str, commands: tuple[tuple[str, ...], ...] = (CHECK, DRY, SWEEP)) -> str:
    """Each command exits 2 with one line naming the file and the field (and `words`), and writes nothing."""
    line = ""
    for command in commands:
        got = run_cli(*command, str(cfg))
        assert got.returncode == 2, (command, got.stdout[-1000:], got.stderr[-2000:])
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in got.stderr, got.stderr
        line = lines[0]
        assert f"{cfg}, field '{field}'" in line, line
        assert all(w in line for w in words), line
        assert not (cfg.parent / "out").exists()  # refused before anything ran
    return line


def _accepted(cfg: Path, *commands: tuple[str, ...]) -> str:
    out = ""
    for command in commands:
        got = run_cli(*command, str(cfg))
        assert got.returncode == 0, (command, got.stderr[-2000:])
        out += got.stdout + got.stderr
    return out


SAMPLED = {"temperature": 1.0}


@pytest.mark.parametrize(
    ("model", "tasks", "field"),
    [
        ({"seed": -1}, None, "models.0.seed"),
        ({"sampling": {**SAMPLED, "seed": -1}}, None, "models.0.sampling.seed"),
        ({"sampling": SAMPLED, "variants": {"v": {"sampling": {"seed": -1}}}}, None, "models.0"),
        ({}, {"seed": -1}, "tasks.jbeqa.seed"),
    ],
    ids=["model", "sampling", "variant", "task"],
)
def test_seed_minus_one_is_refused_everywhere_a_seed_is_given(tmp_path, model, tasks, field):
    """llama.cpp reads -1 as "draw a random seed": two "seeded" sweeps would differ while the provenance says -1."""
    _refused(_config(tmp_path, tasks, **model), field, "seed -1", "0 to 4294967295")


@pytest.mark.parametrize(
    ("model", "tasks", "field"),
    [
        ({"seed": 2**32}, None, "models.0.seed"),
        ({"sampling": {**SAMPLED, "seed": 2**32}}, None, "models.0.sampling.seed"),
        ({}, {"seed": 2**32}, "tasks.jbeqa.seed"),
    ],
    ids=["model", "sampling", "task"],
)
def test_a_seed_of_2_32_is_refused_not_run_as_seed_0(tmp_path, model, tasks, field):
    _refused(_config(tmp_path, tasks, **model), field, "seed 4294967296", commands=(CHECK, SWEEP))


def test_the_largest_seed_runs_as_given(tmp_path):
    cfg = _config(tmp_path, {"seed": SEED_MAX}, seed=SEED_MAX, sampling={**SAMPLED, "seed": SEED_MAX})
    _accepted(cfg, CHECK, DRY)


def test_samples_whose_last_seed_passes_2_32_are_refused(tmp_path):
    """Sample i is seeded seed + i: seed 2^32 - 2 with 3 samples would draw seed 0's answers as its third."""
    for sub, model, field in [
        ("model", {"sampling": {**SAMPLED, "seed": SEED_MAX - 1}, "samples": 3}, "models.0.samples"),
        ("seed", {"sampling": SAMPLED, "seed": SEED_MAX - 1, "samples": 3}, "models.0.samples"),
    ]:
        (tmp_path / sub).mkdir()
        line = _refused(
            _config(tmp_path / sub, None, **model), field, "seeds 4294967294..4294967296", "at most 4294967293"
        )
        assert "seed 0's answers" in line
    (tmp_path / "task").mkdir()
    cfg = _config(tmp_path / "task", {"samples": 3}, sampling={**SAMPLED, "seed": SEED_MAX - 1})
    _refused(cfg, "tasks.jbeqa.samples", "model 'm'", "seeds 4294967294..4294967296", commands=(CHECK, DRY))
    (tmp_path / "edge").mkdir()  # seed + k - 1 == 2^32 - 1: every seed runs as given
    _accepted(_config(tmp_path / "edge", {"samples": 3}, sampling={**SAMPLED, "seed": SEED_MAX - 2}), CHECK, DRY)
    (tmp_path / "greedy").mkdir()  # a greedy model answers once whatever the task's samples: one seed
    _accepted(_config(tmp_path / "greedy", {"samples": 3}, seed=SEED_MAX), CHECK)


THINK = {"think": True, "template_kwargs": {"enable_thinking": True}}


def test_models_check_refuses_a_budget_no_prompt_can_fit(tmp_path):
    cfg = _config(tmp_path, max_model_len=512, reasoning={**THINK, "budget": [64, 1024]})
    _refused(cfg, "models.0", "model 'm'", "thinking budget of 1024 tokens", "max_model_len 512")


def test_a_budget_that_leaves_no_item_room_is_refused_by_the_dry_run_and_the_sweep(tmp_path):
    """The dry run said "0 prompt tokens, 4 overflow" and the sweep scored nothing, exit 0: the prompts are counted
    with the engine's tokenizer-only counter (the fake's: bytes) in the plan both share."""
    cfg = _config(tmp_path, max_model_len=1024, reasoning={**THINK, "budget": 900})
    _accepted(cfg, CHECK)  # no prompt counted there: 900 + an answer + the closing delimiter fit 1024
    line = _refused(cfg, "models.0.reasoning.budget", "model 'm'", "budget of 900", "max_model_len 1024",
                    "jbeqa.0shot.constrained", commands=(DRY, SWEEP))  # fmt: skip
    assert "the shortest needs" in line
    (tmp_path / "fits").mkdir()
    fits = _config(tmp_path / "fits", max_model_len=4096, reasoning={**THINK, "budget": 900})
    assert " 0 overflow" in _accepted(fits, DRY)


def _tiny_config(tmp: Path, path: Path, backend: str, **model: Any) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [{"name": "t", "backend": backend, "path": str(path), "max_model_len": 2048, **model}],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 2}
        },
    }
    p = tmp / "models.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def test_think_on_a_model_whose_vocabulary_lacks_think_tokens_is_refused(tiny, tmp_path):
    cfg = _tiny_config(tmp_path, TINY / "hf", "transformers", reasoning={**THINK, "budget": 16})
    _refused(cfg, "models.0.reasoning.open", "model 't'", "'<think>' (the default)", "plain text",
             commands=(DRY, SWEEP))  # fmt: skip


def test_preset_harmony_on_a_model_without_harmony_tokens_is_refused(tiny, tmp_path):
    gguf = TINY / "think" / "gguf" / "tiny-think-f16.gguf"
    cfg = _tiny_config(tmp_path, gguf, "llamacpp", reasoning={"preset": "harmony", "budget": 16})
    _refused(cfg, "models.0.reasoning.preset", "model 't'", "'<|channel|>analysis<|message|>' (preset harmony)",
             "holds '<|channel|>'", commands=(DRY, SWEEP))  # fmt: skip


def test_custom_delimiters_outside_the_vocabulary_are_refused(tiny, tmp_path):
    variants = {"a": {}, "b": {"reasoning": {"close": "</reason>"}}}
    cfg = _tiny_config(tmp_path, TINY / "think" / "hf", "transformers", variants=variants,
                       reasoning={**THINK, "budget": [8, 16]})  # fmt: skip
    _refused(cfg, "models.0.variants.b.reasoning.close", "'</reason>'", commands=(DRY,))
    (tmp_path / "open").mkdir()
    cfg = _tiny_config(tmp_path / "open", TINY / "think" / "hf", "transformers",
                       reasoning={**THINK, "budget": 8, "open": "<reason>"})  # fmt: skip
    _refused(cfg, "models.0.reasoning.open", "'<reason>'", commands=(DRY,))


def test_a_models_own_delimiters_pass(tiny, tmp_path):
    """<think> and </think> are tokens of the tiny reasoning model; harmony's markup, tokens of the tiny gpt-oss."""
    for sub, path, backend, reasoning in [
        ("think-gguf", TINY / "think" / "gguf" / "tiny-think-f16.gguf", "llamacpp", {**THINK, "budget": 16}),
        ("think-hf", TINY / "think" / "hf", "transformers", {**THINK, "budget": 16}),
        ("harmony-hf", TINY / "harmony" / "hf", "transformers", {"preset": "harmony", "budget": 16}),
    ]:
        (tmp_path / sub).mkdir()
        _accepted(_tiny_config(tmp_path / sub, path, backend, reasoning=reasoning), DRY)


def test_a_served_reasoning_model_is_said_unchecked(tmp_path):
    """A served model's tokenizer is its server's: the dry run says the delimiters and budget are not checked."""
    pytest.importorskip("httpx")  # the openai backend's client: the `server` extra
    server = HostileServer()
    try:
        model = {"name": "s", "backend": "openai", "base_url": server.url, "model": MODEL, "max_model_len": 4096,
                 "reasoning": {**THINK, "budget": 64, "open": "<reason>"}}  # fmt: skip
        cfg = {"output_dir": str(tmp_path / "out"), "models": [model],
               "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["free"],
                                   "limit": 2}}}  # fmt: skip
        p = tmp_path / "models.yaml"
        p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
        out = _accepted(p, DRY)
    finally:
        server.close()
    assert "not checked: s.openai.default.ctx4096: a served model thinks on its server" in out
