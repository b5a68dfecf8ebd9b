#!/usr/bin/env python
"""Speed of the Japanese text toolkit, measured side by side in one run.

    .venv/bin/python scripts/bench_ja.py

1. Tokenization: our morphemes() against raw fugashi Tagger surfaces on the same 100k characters
   (best of 5 each). Ratio = ours throughput / raw throughput (target >= 0.9).
2. Diff scaling: diff_texts + article alignment on a 100k-character contract pair against a 10k pair,
   each with about 5% of its articles edited (target <= 15: near-linear).
3. Median ms for a 10k-character pair: parse both + diff + alignment + structure checks.

The last line is exactly `tokenize ratio: N.NN; diff scaling 100k/10k: N.N`.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from offline_eval.ja.align import changes  # noqa: E402
from offline_eval.ja.checks import check  # noqa: E402
from offline_eval.ja.contract import parse  # noqa: E402
from offline_eval.ja.diff import diff_texts  # noqa: E402
from offline_eval.ja.tokenize import morphemes, tagger  # noqa: E402


def article_pool() -> list[tuple[str, str]]:
    pool = []
    for name in ("service_agreement.md", "nda.md", "sales_master.md"):
        for a in parse((ROOT / "data" / "contracts" / name).read_text(encoding="utf-8")).articles:
            body = re.sub(r"第[0-9０-９一二三四五六七八九十]+条", "第1条", a.body)  # keep references resolvable
            pool.append((a.title or "条項", body))
    return pool


def contract(chars: int, seed: int) -> tuple[str, str]:
    """A contract of about `chars` characters and a revision with ~5% of its articles edited."""
    rng = random.Random(seed)
    pool = article_pool()
    arts, n = [], 0
    while n < chars:
        title, body = pool[len(arts) % len(pool)]
        arts.append((title, body))
        n += len(body) + len(title) + 12
    head = "# 業務委託契約書\n\n株式会社A（以下「甲」という。）と株式会社B（以下「乙」という。）は、次のとおり契約する。\n\n"
    edited = set(rng.sample(range(len(arts)), max(1, len(arts) // 20)))
    a = head + "".join(f"## 第{i + 1}条（{t}）\n{b}\n" for i, (t, b) in enumerate(arts))
    b = head + "".join(f"## 第{i + 1}条（{t}）\n{(b.replace('。', '、ただし書面による。', 1) if i in edited else b)}\n"
                       for i, (t, b) in enumerate(arts))
    return a, b


def best(fn, n: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    text = (contract(100_000, 1)[0])[:100_000]
    tg = tagger()
    raw = best(lambda: [w.surface for w in tg(text)])
    ours = best(lambda: morphemes(text))
    ratio = raw / ours
    print(f"tokenize 100k chars: raw fugashi {raw * 1000:.1f} ms, ours {ours * 1000:.1f} ms "
          f"({len(text) / ours / 1e6:.2f}M chars/s)")

    def diff(a: str, b: str) -> None:
        diff_texts(a, b)
        changes(parse(a), parse(b))

    a10, b10 = contract(10_000, 2)
    a100, b100 = contract(100_000, 3)
    t10 = best(lambda: diff(a10, b10))
    t100 = best(lambda: diff(a100, b100), 3)
    print(f"diff 10k pair ({len(a10)} chars): {t10 * 1000:.1f} ms; 100k pair ({len(a100)} chars): "
          f"{t100 * 1000:.1f} ms; ratio {t100 / t10:.1f} (length ratio {len(a100) / len(a10):.1f})")

    runs = []
    for _ in range(15):
        t0 = time.perf_counter()
        da, db = parse(a10), parse(b10)
        diff_texts(a10, b10)
        changes(da, db)
        check(db)
        runs.append(time.perf_counter() - t0)
    print(f"10k-char pair, parse + diff + checks: median {statistics.median(runs) * 1000:.1f} ms")
    from offline_eval.tasks.legalrikai.focus import focus_statutes

    def statute(n: int, changed: set[int]) -> str:  # LegalRikai's statutes: ~300 provisions, 27k-32k chars
        return "架空法\n\n" + "".join(
            f"（第{i}条の見出し）\n第{i}条　" + ("改正後の条文。事業者は記録を七年間保存しなければならない。" if i in changed
                                         else f"事業者は、電子取引に関する第{i}号の事項を遵守しなければならない。" * 2)
            + "\n\n" for i in range(1, n + 1))

    pre, post = statute(300, set()), statute(300, {30, 31, 150, 151, 152, 290})
    cut = focus_statutes(pre, post)
    tf = best(lambda: focus_statutes(pre, post), 5)
    print(f"focus a {len(pre)}-char statute with 6 amended articles: {tf * 1000:.1f} ms, "
          f"{len(pre) + len(post)} -> {len(cut[0]) + len(cut[1])} chars")
    print(f"tokenize ratio: {ratio:.2f}; diff scaling 100k/10k: {t100 / t10:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
