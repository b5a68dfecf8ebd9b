"""Every benchmark script in scripts/ runs, in its quick mode, and prints the line its docstring promises, with
numbers in it: a refactor of offline_eval cannot break a benchmark silently. Each script is a subprocess from the
repository root, as its docstring runs it. The scripts that need no engine are in the fast tier; the rest start
llama.cpp or vLLM on the tiny models (a quick mode starts vLLM at most twice) and are marked `engine`. Those whose
point is fresh engine starts in processes of their own (a second start over the compile cache, eager against
compiled, a preload, adapters on one engine against one each) are marked `bench` too: `make test-bench` runs them,
and `make test` leaves them out to keep within CI's time (what they exercise in offline-eval is tested on shared
engines: test_compile_cache, test_compile_choice, test_adapter_engines).

Speeds are not asserted (the machine's load moves them); what each script computes from them is: present, finite,
positive, and where the script's point is a property rather than a speed (identical answers, a reused prefix, a
ratio that cannot exceed 1) that property too."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from offline_eval.runtime.preload import tcmalloc_library

NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"  # also nan and inf, so that the check sees them


def run_script(name: str, *args: str, timeout: int = 600) -> str:
    """The script's stdout; rc 0 or the end of what it said."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def numbers(pattern: str, out: str, positive: bool = True) -> list[float]:
    """The numbers of the one line `pattern` matches (each NUM in it a group), each finite (and positive)."""
    pattern = pattern.replace("NUM", NUM)
    lines = [m for line in out.splitlines() if (m := re.fullmatch(pattern, line.strip()))]
    assert len(lines) == 1, f"{len(lines)} lines match {pattern!r} in:\n{out[-3000:]}"
    vals = [float(x) for x in lines[0].groups()]
    assert vals and all(math.isfinite(v) for v in vals), (lines[0].group(0), vals)
    if positive:
        assert all(v > 0 for v in vals), (lines[0].group(0), vals)
    return vals


def last_line(out: str) -> str:
    return [line for line in out.splitlines() if line.strip()][-1].strip()


# -- no engine: the fast tier


def test_report_size():
    """One run on one setting (3,464 items): report.html's size, and the prompts stored smaller than in full."""
    out = run_script("report_size.py", "1", "1", timeout=120)
    html, sidecar, limit, took = numbers(
        r"1 runs x 1 settings x 3464 items: report.html NUM MB, sidecar NUM MB \(inline limit NUM MB\), "
        r"report took NUM s",
        out,
        positive=False,
    )
    assert 0 < html < limit and sidecar == 0  # one run's item data fits inline: no sidecar
    assert took >= 0  # 0.2 s here, printed to 0.1 s: a faster machine may print 0.0
    full, stored, distinct, smaller = numbers(
        r"prompts: NUM MB of text over 1 settings, NUM MB stored \(NUM distinct lines; NUMx smaller\)", out
    )
    assert stored <= full and smaller >= 1 and distinct >= 1


def test_bench_fingerprint():
    """A 256 MiB checkpoint: the first hash reads it, later runs find the digest in the store, far faster."""
    out = run_script("bench_fingerprint.py", "--gb", "0.25", timeout=120)
    mib, first, rate, _ = numbers(r"first hash of NUM MiB: NUM s \(NUM MiB/s; a 15 GB checkpoint: ~NUM s, once\)", out)
    assert mib == 256
    (later_ms,) = numbers(r"later runs \(digest from the store\): NUM ms", out)
    (ratio,) = numbers(r"first/later ratio: NUMx", last_line(out))
    assert ratio > 10  # the store's lookup, not a second hash


def test_bench_fullsize_builds_the_release_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """bench_fullsize's set, read by the JBE-QA loader as the real file: 3,464 statements of 708 questions
    (2-5 each), era-year ids 平成２７年 to 令和６年, 47.6% true, the exam's subject layout less the paper's removals."""
    import importlib.util
    from collections import Counter

    from offline_eval.tasks import make_task
    from offline_eval.tasks.jbeqa.data import load_items, question_of

    monkeypatch.chdir(ROOT)
    spec = importlib.util.spec_from_file_location("bench_fullsize", ROOT / "scripts" / "bench_fullsize.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.write_set(tmp_path, bench.FULL)
    items = load_items(str(tmp_path), "test")
    assert len(items) == 3464 and len({it.id for it in items}) == 3464
    assert sum(it.answer for it in items) == round(0.476 * 3464)
    sizes = Counter(question_of(it.id) for it in items)
    assert None not in sizes and len(sizes) == 708 and set(sizes.values()) <= {2, 3, 4, 5}
    eras = {it.id.split("-")[0] for it in items}
    assert eras == {"平成２７年", "平成２８年", "平成２９年", "平成３０年", "令和元年"} | {
        f"令和{d}年" for d in "２３４５６"
    }
    assert {it.year_ad for it in items} == set(range(2015, 2025))
    assert {it.id[-1].isascii() for it in items} == {True, False}  # both widths, as the release writes them
    assert {"令和3年", "令和２年", "令和元年"} <= {it.year for it in items}
    per_subject = Counter(q.split("-")[1] for q in sizes if q)
    assert per_subject == {"民法": 359, "憲法": 195, "刑法": 154}
    assert len({it.question for it in items}) == 3464  # the same prompt twice would be answered once
    task = make_task(
        "jbeqa", {"data": str(tmp_path), "protocol": "offline-eval", "shots": [0, 4], "mode": ["constrained"]}
    )
    assert len(task.load()) == 3464  # no id is an exemplar's (those are left out of every setting)


# -- real engines on the tiny models


@pytest.mark.engine
def test_bench_greedy(tiny: Path):
    """The LegalRikai judge requests through create_completion and through ours: every answer identical."""
    model = str(tiny / "gguf" / "tiny-q8_0.gguf")
    out = run_script("bench_greedy.py", "--model", model, "--items", "1", "--max-tokens", "60")
    n, tokens = numbers(rf"NUM judge requests, NUM prompt tokens, model {re.escape(model)}", out)
    for label in ("create_completion", "ours"):
        numbers(rf"{label}:\s+NUM s, NUM output tokens,\s+NUM tokens/s", out)
    faster, same, total = numbers(r"greedy under grammar: NUMx faster, NUM/NUM identical", last_line(out))
    assert same == total == n


@pytest.mark.engine
def test_bench_lmeval_without_lmeval(tiny: Path):
    """No lm-eval Python and no old commit: offline-eval's own side alone, its row of the table filled in."""
    out = run_script("bench_lmeval.py", "--n", "20", "--repeats", "1", "--before", "", "--model", str(tiny / "hf"))
    numbers(r"repeat 1 after: wall NUM s, CPU NUM s, phase NUM items/s", out)
    numbers(r"20 JBE-QA-shaped items, .* on vLLM \(CPU build\), median of NUM alternating repeats", out)
    wall, cpu, start, phase, rate, fixed, acc = numbers(r"after\s+NUM\s+NUM\s+NUM\s+NUM\s+NUM\s+NUM\s+NUM", out)
    assert start < wall and phase < wall and 0 < acc <= 1
    assert not re.search(r"^(lm-eval|before)\s", out, re.M)  # both left out
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "before-worktree" not in worktrees


@pytest.mark.engine
def test_bench_overhead(tiny: Path):
    """50 prompts, one pass each: offline-eval's path against raw LLM.generate, and the two comparisons."""
    out = run_script("bench_overhead.py", "--n", "50", "--repeats", "1", "--model", str(tiny / "hf"))
    numbers(r"raw LLM.generate:\s+NUM s\s+NUM items/s", out)
    numbers(r"offline-eval path:\s+NUM s\s+NUM items/s  \(build \+ runner \+ store \+ score\)", out)
    numbers(r"logprob mode \(ours\):\s+NUM s\s+NUM items/s  -> logprob/constrained time NUMx", out)
    numbers(r"4-shot, prefix cache off:\s+NUM s\s+NUM items/s  -> speed-up from caching NUMx", out)
    numbers(r"raw/ours ratio: NUM", last_line(out))


@pytest.mark.engine
def test_bench_server_modes():
    """40 requests to a vLLM server over the tiny model in each mode: both rates and their ratio."""
    out = run_script("bench_server_modes.py", "--n", "40", "--concurrency", "4")
    numbers(r"constrained \(choice, max_tokens 4\):\s+NUM items/s", out)
    numbers(r"logprob \(top_logprobs 20, 1 token\):\s+NUM items/s", out)
    numbers(r"logprob / constrained: NUMx", last_line(out))


@pytest.mark.engine
def test_bench_sweep(tiny: Path):
    """Two tiny GGUF candidates judged by the tiny model, then the judge as it was before issue 16: its prefix
    reuse (prompt tokens submitted / computed) above 1, the two judge phases side by side."""
    out = run_script("bench_sweep.py", "--quick")
    runs, failed = numbers(r"== the sweep \(NUM s, NUM runs, NUM failed\)", out, positive=False)[1:]
    assert runs > 0 and failed == 0
    numbers(r"total NUM s; engine starts and phases NUM s; fixed overhead NUM s", out)
    for label in ("before", "after"):
        n, s, rate, computed, submitted, ratio, start = numbers(
            rf"{label}\s+NUM judgments\s+NUM s\s+NUM items/s  prompt tokens NUM/NUM computed \(NUMx\)  "
            r"engine start NUM s",
            out,
            positive=False,
        )
        assert n > 0 and s > 0 and 0 < computed <= submitted and ratio >= 1 and start >= 0
    numbers(r"judge phase speed-up: NUMx; prompt tokens computed: NUMx fewer", out)
    fixed, reuse = numbers(r"fixed overhead: NUM s; judge prefix reuse: NUMx", last_line(out))
    assert reuse > 1  # each item's judge prompt head is computed once for both candidates


@pytest.mark.engine
def test_bench_thinking(tiny: Path):
    """Four items (4-shot) think and answer on llama.cpp and on vLLM: phase 2's prompt tokens computed over
    submitted, at most 0.1 on llama.cpp, where the answer continues the cache its thinking left."""
    out = run_script("bench_thinking.py", "--items", "4", "--budget", "32")
    for engine in ("llamacpp", "vllm"):
        n, shots, budget, thought, wall, computed, submitted, ratio = numbers(
            rf"{engine}: NUM items, NUM-shot, budget NUM \(NUM thinking tokens\); both phases NUM s; "
            r"phase 2 prompt tokens computed NUM/NUM = NUM",
            out,
            positive=False,
        )
        # the wall, printed to 0.1 s, reads 0.0 on llama.cpp
        assert n == 4 and thought > 0 and wall >= 0 and 0 < computed <= submitted and 0 < ratio <= 1
    llamacpp, vllm, goal = numbers(
        r"phase 2 computed/submitted: llamacpp NUM, vllm NUM \(goal <= NUM\)", last_line(out)
    )
    assert llamacpp <= goal and vllm <= 1  # vLLM reuses whole blocks only: 0.16 on four items


@pytest.mark.engine
@pytest.mark.bench
def test_bench_engine_start(tiny: Path):
    """offline-eval's vLLM start twice over one empty compile cache, each a fresh process: the first compiles
    piecewise and fills the cache, the second loads what the first compiled."""
    out = run_script("bench_engine_start.py", "--quick", "--model", str(tiny / "hf"), "--max-model-len", "2048")
    (s1, added1), (s2, added2) = (
        numbers(
            rf"offline-eval, start {i}: NUM s \(NUM cache files added(?:, compiled model loaded)?, piecewise(?:, tcmalloc)?\)",
            out,
            positive=False,
        )
        for i in (1, 2)
    )
    # A piecewise model loaded in a fresh process may still build a kernel or two that its first start did not keep
    # (seen on some second starts, never on a third); what it loads is the first start's compiled model.
    assert s1 > 0 and s2 > 0 and added1 > 0 and added2 < added1
    assert out.count(", compiled model loaded") == 1  # the second start loads the compiled model whole
    assert out.count(", tcmalloc)") == (2 if tcmalloc_library() else 0)  # preloaded as the CLI does
    assert "vLLM default" not in out
    numbers(r"offline-eval second start: NUM s / first start NUM s = NUM", last_line(out))


@pytest.mark.engine
@pytest.mark.bench
def test_bench_compile_crossover(tiny: Path):
    """Two vLLM loads of the tiny model, compiled over an empty cache and eager: each load's start and phase, the
    same answers both ways, and the crossover line (or the line that says there is none)."""
    out = run_script("bench_compile_crossover.py", "--quick", "--model", str(tiny / "hf"), "--max-model-len", "2048")
    phase = r"0-shot NUM s \(NUM tokens submitted, NUM computed\)"
    compiled = numbers(r"compiled, empty cache: start NUM s \(compiled\); " + phase, out)
    eager = numbers(r"eager: start NUM s \(eager\); " + phase, out)
    assert compiled[2] == eager[2]  # the same prompts
    same, total = numbers(r"eager gives the same answer as compiled on NUM/NUM", out)
    # bf16: inductor's fused kernels round in another order than eager, so a near-tie of the random weights can
    # flip (19 of 20 on CI's AVX2 machine); more than one flip is a wrong compiled model, not rounding
    assert total == 20 and same >= total - 1, (same, total)
    assert "model in the cache" not in out  # --quick: no second compiled load
    end = last_line(out)
    if not end.startswith("eager was not slower"):
        numbers(r"crossover, empty cache: NUM prompt tokens submitted", re.sub(r"(?<=\d),(?=\d)", "", end))


@pytest.mark.engine
@pytest.mark.bench
def test_bench_preload(tiny: Path):
    """Two eager vLLM loads of the tiny model, without a preload and with the venv's Intel OpenMP in LD_PRELOAD: the
    preloaded process has libiomp5 mapped and vLLM no longer warns about it, the answers are the same, and the
    ratio line."""
    out = run_script("bench_preload.py", "--quick", "--model", str(tiny / "hf"), "--max-model-len", "2048")
    load = r"round 1 {}, eager: start NUM s \(eager\); 0-shot NUM s; process NUM s; mapped (\S+); vLLM warns about (.+)"
    lines = {n: re.search(load.format(n).replace("NUM", NUM), out) for n in ("none", "iomp")}
    assert lines["none"] and lines["iomp"], out[-3000:]
    assert "libiomp5.so" in lines["iomp"].group(4).split(",") and "libiomp" not in lines["iomp"].group(5)
    assert "libiomp" in lines["none"].group(5)
    row = numbers(r"iomp\s+eager\s+NUM\s+NUM\s+NUM\s+NUM/NUM\s+\S+", out)
    assert row[3] == row[4] == 8  # the same answers with the preload
    assert not re.search(r"^(tcmalloc|both)\s", out, re.M) and "compiled" not in out  # one preload, eager only
    numbers(r"preload/none, phases summed: iomp eager NUM", last_line(out))


@pytest.mark.engine
def test_bench_fullsize(tiny: Path):
    """A dozen statements, 0- and 4-shot, on llama.cpp: ours and the raw engine give the same answers, and the
    table, the full-size estimate and the promised line are there."""
    model = str(tiny / "gguf" / "tiny-q8_0.gguf")
    out = run_script("bench_fullsize.py", "--engines", "llamacpp", "--items", "12", "--gguf", model)
    for shots in (0, 4):
        row = numbers(rf"llamacpp\s+{shots}-shot" + r"\s+NUM" * 8 + r"\s+NUM/NUM", out, positive=False)
        assert row[2] > 0 and row[3] > 0 and row[7] > 0  # items/s, prompt tokens submitted, raw/ours
        assert row[-2] == row[-1] == 12  # same answers
        assert row[4] <= row[3]  # prompt tokens computed <= submitted
    numbers(
        r"full size \(3464 statements, shots 0,4\) at these rates, start included: llamacpp NUM min",
        out,
        positive=False,
    )
    numbers(r"fullsize: 12 items; llamacpp 0-shot ours NUM items/s raw/ours NUM; llamacpp 4-shot ours NUM items/s "
            r"raw/ours NUM", last_line(out))  # fmt: skip


@pytest.mark.engine
@pytest.mark.bench
def test_bench_adapters(tiny: Path, tmp_path: Path):
    """Two adapters, 20 statements: the shared way makes one engine start, the other two, with the same answers."""
    out = run_script("bench_adapters.py", "--items", "20", "--adapters", "a,b", "--out", str(tmp_path), timeout=900)
    wall1, starts1, start1, rate1 = numbers(r"\| one load \| NUM \| NUM \| NUM \| NUM \|", out)
    wall2, starts2, start2, rate2 = numbers(r"\| 2 loads \| NUM \| NUM \| NUM \| NUM \|", out)
    assert (starts1, starts2) == (1, 2)
    (ratio,) = numbers(r"one load / 2 loads: NUMx faster, answers identical: True", last_line(out))


@pytest.mark.engine
def test_bench_label_tokens(tiny: Path):
    """Logprob mode's label tokens on the tiny model's tokenizer: the lookup finds the full scan's ids, faster."""
    out = run_script("bench_label_tokens.py", "--model", str(tiny / "hf"), "--repeats", "1", timeout=300)
    _, _, ratio = numbers(
        r"full scan \(xgrammar's table\): NUM s; lookup: NUM s; scan / lookup = NUM", last_line(out), positive=False
    )
    assert ratio > 1  # even over 1,200 tokens; Gemma 3's 262,144: 4.8 s against 0.55 s
