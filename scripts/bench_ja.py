#!/usr/bin/env python
"""Speed of the Japanese text toolkit, measured side by side in one run.

    .venv/bin/python scripts/bench_ja.py

1. Tokenization: our morphemes() against raw fugashi Tagger surfaces on the same 100k characters
   (best of 5 each). Ratio = ours throughput / raw throughput (target >= 0.9).
2. Diff scaling: diff_texts + article alignment on a 100k-character contract pair against a 10k pair,
   each with about 5% of its articles edited (target <= 15: near-linear).
3. Median ms for a 10k-character pair: parse both + diff + alignment + structure checks.
4. Scaling of `ja stats` + `ja check` (parse, morphemes, references, checks) on e-Gov-style statutes of 0.4 and
   1.6 MB (UTF-8): the time ratio should stay near the size ratio 4 (quadratic would be 16).
5. Finding precision on the labeled set tests/ja_texts/labels.json (clean statutes and contracts, and ones
   with planted defects): true findings / all findings, on a line of its own, with recall.

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
from offline_eval.ja.labeled import evaluate  # noqa: E402
from offline_eval.ja.numerals import int_to_kanji  # noqa: E402
from offline_eval.ja.show import stats  # noqa: E402
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
    b = head + "".join(
        f"## 第{i + 1}条（{t}）\n{(b.replace('。', '、ただし書面による。', 1) if i in edited else b)}\n"
        for i, (t, b) in enumerate(arts)
    )
    return a, b


def big_statute(mb: float) -> str:
    """An e-Gov-style statute of about `mb` MB (UTF-8) whose every reference resolves: captions, items,
    iroha sub-items, references into another law, ranges, 同条 and abbreviations."""
    out, size, i = ["架空大規模法\n\n第一章　総則\n\n"], 0, 0
    while size < mb * 1e6:
        i += 1
        n, p = int_to_kanji(i), int_to_kanji(max(1, i - 1))
        a = (
            f"（第{n}条の見出し）\n第{n}条　事業者（以下「第{n}号事業者」という。）は、第{p}条第一項及び第二項の規定により、"
            f"次に掲げる事項を行わなければならない。\n"
            f"一　民法（明治二十九年法律第八十九号）第五百四十一条及び同法第五百四十二条に規定する事項\n"
            f"二　前号に掲げるもののほか、同条第二項及び第一項に定める事項であって、次に掲げるもの\nイ　記録\nロ　保存\n"
            f"２　前項の規定は、第{p}条第一項第一号から第二号までに掲げる場合には、適用しない。\n\n"
        )
        out.append(a)
        size += len(a.encode("utf-8"))
    return "".join(out)


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
    print(
        f"tokenize 100k chars: raw fugashi {raw * 1000:.1f} ms, ours {ours * 1000:.1f} ms "
        f"({len(text) / ours / 1e6:.2f}M chars/s)"
    )

    def diff(a: str, b: str) -> None:
        diff_texts(a, b)
        changes(parse(a), parse(b))

    a10, b10 = contract(10_000, 2)
    a100, b100 = contract(100_000, 3)
    t10 = best(lambda: diff(a10, b10))
    t100 = best(lambda: diff(a100, b100), 3)
    print(
        f"diff 10k pair ({len(a10)} chars): {t10 * 1000:.1f} ms; 100k pair ({len(a100)} chars): "
        f"{t100 * 1000:.1f} ms; ratio {t100 / t10:.1f} (length ratio {len(a100) / len(a10):.1f})"
    )

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
            f"（第{i}条の見出し）\n第{i}条　"
            + (
                "改正後の条文。事業者は記録を七年間保存しなければならない。"
                if i in changed
                else f"事業者は、電子取引に関する第{i}号の事項を遵守しなければならない。" * 2
            )
            + "\n\n"
            for i in range(1, n + 1)
        )

    pre, post = statute(300, set()), statute(300, {30, 31, 150, 151, 152, 290})
    cut = focus_statutes(pre, post)
    tf = best(lambda: focus_statutes(pre, post), 5)
    print(
        f"focus a {len(pre)}-char statute with 6 amended articles: {tf * 1000:.1f} ms, "
        f"{len(pre) + len(post)} -> {len(cut[0]) + len(cut[1])} chars"
    )

    def stats_and_check(text: str) -> None:
        doc = parse(text)
        stats(doc)
        check(doc)

    small, large = big_statute(0.4), big_statute(1.6)
    ts, tl = best(lambda: stats_and_check(small), 3), best(lambda: stats_and_check(large), 2)
    print(
        f"ja stats + check: {len(small.encode()) / 1e6:.2f} MB {ts:.2f} s, {len(large.encode()) / 1e6:.2f} MB "
        f"{tl:.2f} s; scaling {tl / ts:.1f} for size ratio {len(large) / len(small):.1f} (quadratic: 16)"
    )
    ev = evaluate(ROOT / "tests" / "ja_texts" / "labels.json", ROOT)
    for line in ev["false_findings"] + [f"missed: {m}" for m in ev["missed"]]:
        print(f"  {line}")
    print(
        f"finding precision: {ev['precision']:.3f} ({ev['true_findings']} of {ev['findings']} findings are planted "
        f"defects; recall {ev['recall']:.3f} of {ev['planted']} planted, {ev['documents']} documents)"
    )
    print(f"tokenize ratio: {ratio:.2f}; diff scaling 100k/10k: {t100 / t10:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
