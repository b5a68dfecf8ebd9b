#!/usr/bin/env python
"""Bracket nesting against flat text of the same size: `ja stats`, `ja check` and `ja diff` side by side.

    .venv/bin/python scripts/bench_ja_nesting.py            # depth 20k (80k characters) and 600 KB
    .venv/bin/python scripts/bench_ja_nesting.py --big      # and 1.2 MB and 10 MB
    .venv/bin/python scripts/bench_ja_nesting.py --sizes 80000,400000 --timeout 300
    PYTHONPATH=/path/to/other/checkout .venv/bin/python scripts/bench_ja_nesting.py   # another version

Each cell is one run in a fresh process (the tagger built before the clock starts), seconds, ">T" past the
timeout. What each command does, on an e-Gov article holding the text:
- stats: parse + `show.stats` (characters, morphemes, references), what `ja stats` prints;
- check: parse + `checks.check`, what `ja check` prints;
- diff: `diff_texts` + `align.changes` of the text against itself with one edit in the middle, what `ja diff`
  computes.
Shapes: 「（…）」 nested (balanced), every bracket kind nested (「（『［〔([ and back), opening only (unbalanced),
against 「あ」 repeated (flat). The package under test is the one Python imports (PYTHONPATH first); this script
does not put its own checkout on the path.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

HEAD = "架空法\n\n（目的）\n第一条　"
OPEN, CLOSE = "「（『［〔([", "」）』］〕)]"


def text(shape: str, chars: int) -> str:
    if shape == "nested":
        d = chars // 4
        body = "「（" * d + "甲は乙に報告する。" + "）」" * d
    elif shape == "nested_all":
        d = chars // (2 * len(OPEN))
        body = OPEN * d + "甲は乙に報告する。" + CLOSE[::-1] * d
    elif shape == "opening":
        body = OPEN * (chars // len(OPEN)) + "甲は乙に報告する。"
    elif shape == "flat":
        body = "「あ」" * (chars // 3) + "甲は乙に報告する。"
    else:
        raise KeyError(shape)
    return HEAD + body + "\n"


def one(shape: str, chars: int, what: str) -> float:
    from offline_eval.ja.align import changes
    from offline_eval.ja.checks import check
    from offline_eval.ja.contract import parse
    from offline_eval.ja.diff import diff_texts
    from offline_eval.ja.show import stats
    from offline_eval.ja.tokenize import tagger

    tagger()
    a = text(shape, chars)
    b = a.replace("甲は乙に報告する。", "甲は乙に書面で報告する。")
    t0 = time.perf_counter()
    if what == "stats":
        stats(parse(a))
    elif what == "check":
        check(parse(a))
    else:
        diff_texts(a, b)
        changes(parse(a), parse(b))
    return time.perf_counter() - t0


def cell(shape: str, chars: int, what: str, timeout: float) -> str:
    cmd = [sys.executable, __file__, "--one", shape, str(chars), what]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
    except subprocess.TimeoutExpired:
        return f">{timeout:.0f}"
    except subprocess.CalledProcessError as e:
        return "error: " + (e.stderr.strip().splitlines() or ["?"])[-1][:40]
    return f"{float(out.strip()):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also 1.2 MB and 10 MB inputs")
    ap.add_argument("--sizes", help="comma-separated sizes in characters instead (e.g. 80000,400000)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per cell (default 120)")
    ap.add_argument("--one", nargs=3, metavar=("SHAPE", "CHARS", "WHAT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(one(a.one[0], int(a.one[1]), a.one[2]))
        return
    import offline_eval

    print(f"package: {offline_eval.__file__}")
    sizes = (
        [int(x) for x in a.sizes.split(",")] if a.sizes else [80_000, 200_000] + ([400_000, 3_400_000] if a.big else [])
    )
    shapes = ["nested", "nested_all", "opening"]
    print(f"{'size':>14} {'command':>7} " + " ".join(f"{s:>11}" for s in shapes) + f" {'flat':>11}")
    for chars in sizes:
        mb = len(text("flat", chars).encode()) / 1e6
        for what in ("stats", "check", "diff"):
            row = [cell(s, chars, what, a.timeout) for s in [*shapes, "flat"]]
            print(f"{chars:>8} {mb:>4.1f}MB {what:>7} " + " ".join(f"{x:>11}" for x in row), flush=True)


if __name__ == "__main__":
    main()
