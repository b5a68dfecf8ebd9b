"""The evaluation model's step: the critique prompt, the 8-grade conclusion scale, JSON or tag parsing."""

from __future__ import annotations

import json
import re
from typing import Any

# Ordered from unusable to nearly flawless with clear strengths (LegalEval-Q's conclusion levels).
GRADES = ("使用不能", "重大な欠陥あり", "不十分", "やや不十分", "概ね妥当", "妥当", "良好", "ほぼ完璧で明確な長所あり")
DIMENSIONS = ("内容の質", "構成と整理", "言語表現", "追加の考慮", "指摘事項")

SYSTEM = (
    "あなたは法律分野の回答を評価する専門家です。質問に対する回答を、次の五つの観点から批評してください："
    "内容の質、構成と整理、言語表現、追加の考慮、指摘事項（不足や誤り）。"
    "その上で、結論を次の八段階から一つ選んでください（低い順）：" + "、".join(GRADES) + "。"
)


def schema(comment_max_chars: int = 1200) -> dict[str, Any]:
    """{comment, conclusion}: a bounded critique and one of the eight grades."""
    return {
        "type": "object",
        "properties": {
            "comment": {"type": "string", "minLength": 1, "maxLength": comment_max_chars},
            "conclusion": {"enum": list(GRADES)},
        },
        "required": ["comment", "conclusion"],
        "additionalProperties": False,
    }


def user_message(query: str, answer: str, resource: str | None = None) -> str:
    """The question, its resource and the output format first, the answer last: every candidate's message on one
    question shares everything up to the answer, so the engine reuses that prefix."""
    parts = [f"【質問】\n{query}"]
    if resource:
        parts.append(f"【参考資料】\n{resource}")
    parts.append('最後の【回答】を批評し、JSON で {"comment": 批評, "conclusion": 八段階の結論} を出力してください。')
    parts.append(f"【回答】\n{answer}")
    return "\n\n".join(parts)


def parse_json(text: str) -> tuple[str, str] | None:
    try:
        obj = json.loads(text, strict=True)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("conclusion") not in GRADES or not isinstance(obj.get("comment"), str):
        return None
    return obj["comment"], obj["conclusion"]


def _tag(name: str) -> re.Pattern[str]:
    # <reasoning>…</reasoning>, <reasoning:>…, <reasoning>: … (the authors' format, with or without a colon)
    return re.compile(rf"<{name}\s*:?\s*>\s*:?\s*(.*?)\s*</{name}\s*>", re.S)


_REASONING, _ANS = _tag("reasoning"), _tag("ans")


def parse_tags(text: str) -> tuple[str, str] | None:
    """(comment, conclusion) from tag-format output; None when a tag is missing or the grade is unknown."""
    r, a = _REASONING.search(text), _ANS.search(text)
    if not r or not a:
        return None
    conclusion = a.group(1).strip().strip("。.「」\"'")
    if conclusion not in GRADES:
        match = [g for g in GRADES if g in conclusion]
        if len(match) != 1:
            return None
        conclusion = match[0]
    return r.group(1).strip(), conclusion
