"""JBE-QA's data in the public release's own form: era years (平成27年, 令和５年, 令和元年) or Gregorian ones,
statement ids that name their exam question (令和５年-民法-１８-１), `label` Y/N agreeing with the boolean
`answer`; every bad record named by file, record and field."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, StrictBool, computed_field, field_validator

from offline_eval.ja.numerals import kanji_to_int
from offline_eval.tasks.kit import InputError, TaskItem, read_items

# First Gregorian year of each era, and its last year number where the era has ended.
_ERAS = {"明治": (1868, 45), "大正": (1912, 15), "昭和": (1926, 64), "平成": (1989, 31), "令和": (2019, None)}
_ERA_YEAR = re.compile(r"(明治|大正|昭和|平成|令和)\s*(元|\d+|[〇一二三四五六七八九十]+)\s*年度?")
_AD_YEAR = re.compile(r"(\d{4})\s*年?度?")
_AD_RANGE = (1868, 2100)


# A statement's id in the release: era year, subject, question, statement (令和５年-民法-１８-１).
_STATEMENT_ID = re.compile(rf"(?P<year>{_ERA_YEAR.pattern})-(?P<subject>[^-]+)-(?P<question>\d+)-\d+")


def question_of(item_id: str) -> str | None:
    """The exam question a statement belongs to, from the release's id: 令和５年-民法-１８-１ is statement 1 of
    question 18 of the 2023 Civil Law paper, "2023-民法-18" (half- or full-width digits, any era year
    `gregorian_year` reads). None: an id of another shape."""
    m = _STATEMENT_ID.fullmatch(unicodedata.normalize("NFKC", str(item_id)).strip())
    if m is None:
        return None
    try:
        year = gregorian_year(m["year"])
    except ValueError:
        return None
    return f"{year}-{m['subject']}-{int(m['question'])}"


def gregorian_year(value: int | str) -> int:
    """The Gregorian year of a JBE-QA `year`: 平成27年 -> 2015, 平成３０年 -> 2018, 令和元年 -> 2019,
    令和６年 -> 2024 (half- or full-width or kanji digits); an integer or "2024" is already Gregorian."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected an era year such as '令和5年' or a Gregorian year, got {value!r}")
    if isinstance(value, int):
        year = value
    else:
        text = unicodedata.normalize("NFKC", value).strip()  # full-width digits, and ㍻/㋿ to 平成/令和
        if m := _ERA_YEAR.fullmatch(text):
            era, num = m.group(1), m.group(2)
            if num == "元":
                n = 1
            elif num.isdigit():
                n = int(num)
            else:
                n = kanji_to_int(num)
            start, last = _ERAS[era]
            if n < 1 or (last is not None and n > last):
                raise ValueError(
                    f"{value!r} does not exist: {era} runs from 元年 to {f'{last}年' if last else 'today'}"
                )
            return start + n - 1
        if not (m := _AD_YEAR.fullmatch(text)):
            raise ValueError(
                f"cannot read the year {value!r}: expected an era year such as '平成27年', '令和元年' "
                f"or '令和５年', or a Gregorian year such as 2015"
            )
        year = int(m.group(1))
    if not _AD_RANGE[0] <= year <= _AD_RANGE[1]:
        raise ValueError(f"year {value!r} is not a Gregorian year between {_AD_RANGE[0]} and {_AD_RANGE[1]}")
    return year


class JBEQAItem(TaskItem):
    """The real dataset's schema. Unknown extra columns are ignored; `year` is kept as given, and
    `year_ad` is its Gregorian year."""

    year: int | str
    subject: str
    subject_jp: str
    theme: str | None = None
    question_type: str | None = None
    instruction: str
    remark: str | None = None
    label: Literal["Y", "N"]
    lead_in: str | None = None
    question: str = Field(min_length=1)
    answer: StrictBool

    @field_validator("year", mode="before")
    @classmethod
    def _year(cls, v: Any) -> Any:
        gregorian_year(v)
        return v

    @computed_field  # type: ignore[prop-decorator]
    @property
    def year_ad(self) -> int:
        return gregorian_year(self.year)


def load_items(path: str, split: str) -> list[JBEQAItem]:
    items = []
    for where, it in read_items(path, split, JBEQAItem):
        if (it.label == "Y") != it.answer:
            raise InputError(
                f"label {it.label!r} disagrees with answer {str(it.answer).lower()} (label 'Y' "
                f"goes with answer true, 'N' with false)",
                file=str(path),
                record=where,
                field="label/answer",
            )
        items.append(it)
    return items


def choose_exemplars(pool: Sequence[JBEQAItem], k: int, ids: list[str] | None, source: str) -> list[JBEQAItem]:
    """By id if given; otherwise the first ceil(k/2) true and floor(k/2) false items by id, alternating."""
    by_id = {it.id: it for it in pool}
    if ids:
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise InputError(f"exemplar ids not found: {', '.join(missing)}", file=source, field="exemplar_ids")
        chosen = [by_id[i] for i in ids]
        if len(chosen) < k:
            raise InputError(f"{k} shots need {k} exemplar_ids, got {len(chosen)}", field="exemplar_ids")
        return chosen
    ordered = sorted(pool, key=lambda it: it.id)
    pos = [it for it in ordered if it.answer][: (k + 1) // 2]
    neg = [it for it in ordered if not it.answer][: k // 2]
    if len(pos) + len(neg) < k:
        raise InputError(
            f"{k} shots need {(k + 1) // 2} true and {k // 2} false items to draw from", file=source, field="shots"
        )
    out = []
    for i in range(max(len(pos), len(neg))):
        out += pos[i : i + 1] + neg[i : i + 1]
    return out
