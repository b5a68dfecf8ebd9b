"""JBE-QA: true/false statements from the Japanese bar exam, zero- and few-shot (task.py), its data in the
release's form (data.py), and its report sections (report.py)."""

from .data import choose_exemplars, gregorian_year, load_items
from .prompts import paper_message
from .task import SYSTEM_PROMPT, JBEQATask, parse_answer, user_message

TASK = JBEQATask
__all__ = [
    "SYSTEM_PROMPT",
    "TASK",
    "JBEQATask",
    "choose_exemplars",
    "gregorian_year",
    "load_items",
    "paper_message",
    "parse_answer",
    "user_message",
]
