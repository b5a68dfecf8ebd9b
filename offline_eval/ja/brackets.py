"""Where a reference sits in the text: inside a quote (「第一項」とあるのは: words quoted, not a reference of this
place) or inside round brackets (a parenthetical insertion, which 同条 / 同項 do not refer into and a list goes on
past). Both in one pass over the text, with memory constant per open bracket however deep brackets nest."""

from __future__ import annotations

import array
import re
from typing import Generic, TypeVar

M = TypeVar("M")  # the mentions so far (what 同条 / 同項 / 同号 / 同法 take up)
C = TypeVar("C")  # a chain's context, offered to the chain that goes on after a bracket or a join

_PARENS = re.compile(r"[（）()\n]")
OPEN = "（("
# After a reference, these name a part of it (第七十三条第一項ただし書, 同条第三項後段) and a list may go on past them.
_PART = re.compile(r"ただし書|本文|前段|中段|後段|柱書|各号列記以外の部分")
_JOINS = ("及び", "並びに", "又は", "若しくは", "、", "，", ",", "・")


class Brackets(Generic[M, C]):
    """Round brackets met so far, read left to right along with the chains, in one pass over the text.

    - 同条 / 同項 / 同号 / 同法 do not take up what is mentioned only inside a bracket once it is closed (a
      parenthetical insertion is skipped when reading the sentence around it): the mentions at an opening
      bracket are put back at its closing one. Inside the bracket, the mentions before it still count.
    - A list goes on past a bracketed insertion: in 第四十三条第一項（前条において…を含む。）、第四項（…）及び
      第五項, 第四項 and 第五項 are paragraphs of 第四十三条. A chain that ends at an opening bracket leaves its
      context there; at the closing bracket it is offered to a chain that starts right after it and a join.

    Brackets inside quotes (skipped spans) are not counted; a line break closes every open bracket. Memory is
    two entries per open bracket (its position and the mentions then), whatever the nesting depth."""

    def __init__(self, text: str, quotes: list[tuple[int, int]]) -> None:
        self.text = text
        self.marks = _PARENS.finditer(text)
        self.quotes = quotes
        self.q = 0
        self.opened = array.array("q")  # positions of the open brackets
        self.saved: list[M] = []  # the mentions when each was opened
        self.pending: dict[int, C] = {}  # bracket -> chain context
        self.after: dict[int, C] = {}  # position -> context offered
        self.next = next(self.marks, None)

    def advance(self, pos: int, seen: M) -> M:
        """Read the brackets before `pos`; the mentions as they stand there."""
        while self.next is not None and self.next.start() < pos:
            m, self.next = self.next, next(self.marks, None)
            p, c = m.start(), m.group(0)
            while self.q < len(self.quotes) and self.quotes[self.q][1] <= p:
                self.q += 1
            if self.q < len(self.quotes) and self.quotes[self.q][0] <= p:
                continue  # inside a quote
            if c == "\n":
                if self.saved:
                    seen = self.saved[0]
                del self.opened[:]
                self.saved.clear()
                self.pending.clear()
            elif c in OPEN:
                self.opened.append(p)
                self.saved.append(seen)
            elif self.opened:
                start = self.opened.pop()
                seen = self.saved.pop()
                ctx = self.pending.pop(start, None)
                if ctx is not None:
                    self.offer(p + 1, ctx, closed=True)
        return seen

    def offer(self, pos: int, ctx: C, *, closed: bool = False) -> None:
        """A chain's context left at `pos`: its end, or a closing bracket after it (closed=True). A join right
        there, or after a part word (ただし書, 後段) or at the closing bracket of an insertion, goes on with it."""
        start = pos
        while True:
            m = _PART.match(self.text, pos)
            if m is None:
                break
            pos = m.end()
        if pos < len(self.text) and self.text[pos] in OPEN:
            self.pending[pos] = ctx
        elif closed or pos > start:  # a join right at a chain's end is the chain's own (refscan reads it)
            self.after[pos] = ctx

    def carried(self, start: int) -> C | None:
        """The context a chain starting at `start` continues: one offered right before a join before it."""
        if not self.after:
            return None
        for w in _JOINS:
            k = start - len(w)
            if k >= 0 and k in self.after and self.text.startswith(w, k):
                return self.after[k]
        return None


_QUOTE_MARKS = re.compile(r"[「」『』]")
_QUOTE_CLOSE = {"「": "」", "『": "』"}


def quotes(text: str) -> list[tuple[int, int]]:
    """Quoted text holds no references of this place: 第十五条第三項中「第一項」とあるのは「第三十条」と (a
    reading-as provision quotes another article's words), 「第三号被保険者」とは (a term).

    A quote runs from 「 to the first 」 after it on the same line (『 to 』 likewise), read left to right: what
    `「[^」\n]*」|『[^』\n]*』` finds, but in one pass over the brackets (that regex, tried at each of a line's
    unclosed 「, read the rest of the line from each, quadratic in the number of them)."""
    out: list[tuple[int, int]] = []
    pos, n = 0, len(text)
    while pos < n:
        eol = text.find("\n", pos)
        stop = n if eol < 0 else eol
        if text.find("」", pos, stop) >= 0 or text.find("』", pos, stop) >= 0:  # else no quote ends on this line
            _quotes_in_line([(m.start(), m.group(0)) for m in _QUOTE_MARKS.finditer(text, pos, stop)], out)
        if eol < 0:
            break
        pos = eol + 1
    return out


def _quotes_in_line(marks: list[tuple[int, str]], out: list[tuple[int, int]]) -> None:
    """The quotes among one line's brackets (position, bracket), in order. An opening bracket with no closing
    one after it on its line opens no quote, nor does any later one of its kind."""
    closes: dict[str, list[int]] = {"」": [], "』": []}
    for pos, c in marks:
        if c in ("」", "』"):
            closes[c].append(pos)
    at = {"」": 0, "』": 0}  # the first closing bracket of each kind not yet passed
    dead: set[str] = set()
    end = -1  # the end of the last quote: brackets before it are inside it
    for pos, c in marks:
        if pos < end or c not in _QUOTE_CLOSE or c in dead:
            continue
        want = _QUOTE_CLOSE[c]
        found, k = closes[want], at[want]
        while k < len(found) and found[k] < pos:
            k += 1
        at[want] = k
        if k == len(found):
            dead.add(c)
            continue
        out.append((pos, found[k] + 1))
        end = found[k] + 1


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
