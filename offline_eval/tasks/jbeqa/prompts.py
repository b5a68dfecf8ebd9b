"""JBE-QA's messages under each protocol. `paper`: the authors' system prompt and their user message, formatted
here by the rules of their format_question (hancules/JBE-QA src/config.py lines 82-105) with their instruction
table (authors.py); `offline-eval`: our own system prompt and message."""

from __future__ import annotations

from typing import TypeGuard

from . import authors
from .data import JBEQAItem

OURS_SYSTEM_PROMPT = (
    "あなたは日本の司法試験の問題に解答する法律の専門家です。"
    "与えられた記述が正しい場合は1、誤っている場合は0とだけ出力してください。説明は不要です。"
)


def _present(v: str | None) -> TypeGuard[str]:
    return v is not None and v.strip() not in ("", "None")


def user_message(it: JBEQAItem) -> str:
    """offline-eval's message: labelled theme and statement, the release's instruction as it is."""
    lines = [f"科目：{it.subject_jp}"]
    if _present(it.theme):
        lines.append(f"テーマ：{it.theme}")
    if _present(it.lead_in):
        lines.append(it.lead_in)
    lines.append(it.instruction)
    lines.append(f"記述：{it.question}")
    if _present(it.remark):
        r = it.remark.strip()
        lines.append(r if r.startswith("なお") else f"なお、{r}")
    return "\n".join(lines)


def paper_instruction(instruction: str) -> str | None:
    """The phrase the authors send for a release instruction (None: their table has none for it)."""
    return authors.INSTRUCTIONS.get(instruction.strip())


def paper_message(it: JBEQAItem) -> str:
    """The authors' user message: 科目, the theme as 「…について」 (a theme of "None" is none), the lead-in, their
    phrase for the instruction, the statement, the remark always after なお、; each on its own line, and the whole
    stripped. The instruction must be in their table (the task checks that where it loads the items)."""
    phrase = paper_instruction(it.instruction)
    if phrase is None:
        raise KeyError(it.instruction)
    theme = it.theme if it.theme is not None and it.theme != "None" else ""
    text = f"科目：{it.subject_jp}\n"
    if theme:
        text += f"{theme}について\n"
    if it.lead_in not in (None, ""):
        text += f"{it.lead_in}\n"
    if it.instruction:
        text += f"{phrase}\n"
    text += f"{it.question}\n"
    if it.remark not in (None, ""):
        text += f"なお、{it.remark}\n"
    return text.strip()


def system_prompt(protocol: str) -> str:
    return authors.SYSTEM_PROMPT if protocol == "paper" else OURS_SYSTEM_PROMPT


def message(it: JBEQAItem, protocol: str) -> str:
    return paper_message(it) if protocol == "paper" else user_message(it)
