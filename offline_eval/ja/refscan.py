"""Reference expressions in legal Japanese, read left to right in one pass (linear in the text).

A reference expression is a chain of paths joined by 及び / 又は / 並びに / 若しくは / 、 or a range から…まで
(乃至 in older statutes):

    内閣府設置法（平成十一年法律第八十九号）第四十九条第一項
    前条第二項から第四項まで        第十五条第三項又は第四項        同条第二項及び第四項

A path is an optional anchor (前条, 同項, 前各号, 前二号, ...) and then 第N条(のN), 第N項, 第N号, 各号 and an
iroha sub-item (第一号イ). A law name before the chain (民法, 同法, 法, 内閣府設置法（…）, （昭和…法律第…号）)
makes it a reference into another law; 本契約 / この法律 name the document itself. Numbers of laws and forms
(法律第八十九号, 様式第一号) are not references.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .contract import IROHA
from .numerals import NUM, NUM_CHARS, article_label, to_int

_NOT_SUFFIX = f"(?![{NUM_CHARS}日月年人回倍分時件個箇か])"
_ANCHOR = (
    r"(?:(?P<rel>前|次)(?P<cnt>各|[二三四五六七八九十2-9２-９]+)?(?P<rlvl>[条項号])"
    r"|(?P<own>本|この|同)(?P<olvl>[条項号]))(?![件例約文目])"
)
_PATH = re.compile(
    rf"(?:{_ANCHOR})?"
    rf"(?:第(?P<a>{NUM})条(?P<asub>(?:の{NUM}{_NOT_SUFFIX})*))?"
    rf"(?:第(?P<p>{NUM})項)?"
    rf"(?:第(?P<i>{NUM})号(?:の(?P<ib>{NUM}){_NOT_SUFFIX})?(?!様式|書式|証))?"
    rf"(?P<each>各[項号])?"
    rf"(?P<sub>[{IROHA}](?![ァ-ヶー]))?"
)
_START = re.compile(rf"第{NUM}[条項号]|(?:前|次)(?:各|[二三四五六七八九十2-9２-９]+)?[条項号]|(?:本|この|同)[条項号]")
_JOIN = re.compile(r"及び|並びに|又は|若しくは|、|，|,|・|から|乃至")
_UNTIL = re.compile(r"まで")
# Law names end in one of these; 本契約 / この法律 / 当規程 name the document itself.
_LAW_KIND = r"(?:法律|法|政令|省令|府令|令|規則|規程|条例|条約|協定|契約|覚書|約款|規約|附則)"
# What precedes a law reference; `_prefix` finds this match directly, in time bounded per reference.
_PREFIX = re.compile(r"(?P<name>[^\s、。，,・（）()「」『』\n条項号]{0,40}?)(?P<paren>（[^（）\n]{0,80}）)?\Z")
_ENDS_IN_KIND = re.compile(rf"{_LAW_KIND}\Z")
_LAW_NUMBER = re.compile(r"(?:法律|政令|令|規則|条例|告示|訓令|条約|様式|書式|別記)\Z")
_HAS_LAW_NUMBER = re.compile(rf"(?:法律|政令|令|規則|条例|告示)第{NUM}号")
_SELF = re.compile(rf"^(?:本|この|当)[^\s]{{0,4}}?{_LAW_KIND}$")
_PARTICLE = re.compile(r".*[はがもへ]")
_CONJ = re.compile(r"及び|並びに|又は|若しくは")
_HIRAGANA = re.compile(r"[ぁ-ゖ]")
_LOOKBACK = 140
# A kanji right after 第三号 makes a word (第三号被保険者, 第一号法定受託事務), unless it goes on with the
# reference (及び, 並びに, 又は, 若しくは, 中, 前段, 後段, 本文, 等, 所定, 第…, 以下, 全部, 柱書, 規定, 除く,
# 記載, 同様). After 条 and 項 a kanji does not stop a reference (第5条違反, 第2条記載の業務).
_COMPOUND = re.compile(r"(?![及並又若中前後本各等所第以全柱規除記同])[\u4e00-\u9fff々]")
_PREFIX_ENDS = set("律法令則程例約定書款）")


@dataclass
class Path:
    """One coordinated element: what it says, before any resolution."""

    text: str
    start: int
    end: int
    anchor: str | None  # 前 | 次 | 本 | この | 同, or None for a path that starts with 第
    level: str | None  # the anchor's level: 条 | 項 | 号
    count: int | None  # 前二号 -> 2, 前各号 -> 0 (all before), else 1
    article: str | None  # label, e.g. "61-2"
    paragraph: int | None
    item: int | None
    sub: int | None  # iroha position of a sub-item (イ = 1)
    branch: int | None  # 第一号の二 -> item 1, branch 2


@dataclass
class Chain:
    """Paths read as one expression. `law`: None for the document itself, else the other law's name ("" when the
    expression names none, e.g. after （昭和…法律第…号）; "同法" when no law was named before it)."""

    law: str | None
    elements: list[tuple[Path, Path | None]]  # (path, end of its range or None)
    start: int
    end: int


def _path(m: re.Match[str]) -> Path | None:
    g = m.group
    if not m.group(0) or (m.group(0).endswith("号") and not g("each") and _COMPOUND.match(m.string, m.end())):
        return None  # 第三号被保険者; but 前条第一項各号列記以外の部分 is a reference
    anchor = g("rel") or g("own")
    level = g("rlvl") or g("olvl")
    if anchor is None and not (g("a") or g("p") or g("i")):
        return None
    end = m.end()
    sub = g("sub")
    if sub and not (g("i") or level == "号"):  # イ after 条 or 項 is not a sub-item
        end, sub = m.start("sub"), None
    cnt = g("cnt")
    count = None if anchor is None else (0 if cnt == "各" else (to_int(cnt) if cnt else 1))
    article = None
    if g("a"):
        subs = [to_int(x) for x in re.findall(NUM, g("asub") or "")]
        article = article_label(to_int(g("a")), subs[0] if subs else None)
        if len(subs) > 1:
            article += "".join(f"-{x}" for x in subs[1:])
    return Path(
        m.string[m.start() : end],
        m.start(),
        end,
        anchor,
        level,
        count,
        article,
        to_int(g("p")) if g("p") else None,
        to_int(g("i")) if g("i") else None,
        IROHA.index(sub) + 1 if sub else None,
        to_int(g("ib")) if g("ib") else None,
    )


_NAME_BAD = re.compile(r"[\s、。，,・（）()「」『』\n条項号]")


def _prefix(window: str) -> tuple[str, str | None]:
    """(name, paren) as `_PREFIX.search(window)` finds them, directly: the bracket (a law number) is the last
    （…） of the window if it ends it, and the name is the longest run of name characters (at most 40) before
    it. The regex tried every start in the window with every name length (thousands of steps a reference)."""
    n = len(window)
    q = window.rfind("（")
    paren = None
    end = n
    if 0 <= q < n - 1 and window[-1] == "）" and n - q - 2 <= 80:
        inner = window[q + 1 : n - 1]
        if "）" not in inner and "\n" not in inner:
            paren, end = window[q:], q
    run = window[max(0, end - 40) : end]
    bad = _NAME_BAD.search(run[::-1])  # the last character that cannot be in a name
    return (run if bad is None else run[len(run) - bad.start() :]), paren


def _law_before(text: str, start: int) -> str | None:
    """The other law this chain points into (see Chain.law), from the text just before it."""
    if not start or text[start - 1] not in _PREFIX_ENDS:
        return None
    name, paren = _prefix(text[max(0, start - _LOOKBACK) : start])
    if paren and _HAS_LAW_NUMBER.search(paren):
        # 皇室典範（昭和二十二年法律第三号）第二十六条: a law number names a law, whatever its name ends in.
        return _trim(name) if name else ""
    if not name or not _ENDS_IN_KIND.search(name):
        return None
    name = _trim(name)
    return None if _SELF.match(name) else name


def _trim(name: str) -> str:
    """The law's name out of the run of text before 第: drop a clause before it (事業者は民法 -> 民法,
    解除及び同法 -> 同法) but keep a conjunction inside a name (出入国管理及び難民認定法)."""
    m = _PARTICLE.match(name)
    if m and m.end() < len(name):
        name = name[m.end() :]
    for c in reversed(list(_CONJ.finditer(name))):
        if not c.start() or _HIRAGANA.search(name, 0, c.start()):
            return name[c.end() :] if c.end() < len(name) else name
    return name


def chains(text: str, skip: list[tuple[int, int]] | None = None, end: int | None = None) -> Iterator[Chain]:
    """Every reference chain that starts before `end`, in reading order. `skip`: sorted spans (article
    headings) that hold none."""
    done = 0
    k = 0
    skip = skip or []
    for m in _START.finditer(text, 0, len(text) if end is None else end):
        s = m.start()
        if s < done:
            continue
        while k < len(skip) and skip[k][1] <= s:
            k += 1
        if k < len(skip) and skip[k][0] <= s:
            continue
        first = _PATH.match(text, s)
        p = _path(first) if first else None
        if p is None:
            continue
        if (
            p.anchor is None
            and p.article is None
            and p.paragraph is None
            and _LAW_NUMBER.search(text, max(0, s - 4), s)
        ):
            done = p.end  # 法律第八十九号, 様式第一号: a number, not an item
            continue
        law = _law_before(text, s) if p.anchor is None else None
        elements: list[tuple[Path, Path | None]] = [(p, None)]
        pos = p.end
        while True:
            j = _JOIN.match(text, pos)
            if not j:
                break
            nm = _PATH.match(text, j.end())
            nxt = _path(nm) if nm else None
            if nxt is None:
                break
            if j.group(0) == "乃至":  # 第一項乃至第四項 (older statutes): a range with no まで
                elements[-1] = (elements[-1][0], nxt)
                pos = nxt.end
            elif j.group(0) == "から":
                u = _UNTIL.match(text, nxt.end)
                if not u:
                    break
                elements[-1] = (elements[-1][0], nxt)
                pos = u.end()
            else:
                elements.append((nxt, None))
                pos = nxt.end
        done = pos
        yield Chain(law, elements, s, pos)
