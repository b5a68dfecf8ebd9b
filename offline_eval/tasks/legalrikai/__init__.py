"""LegalRikai Open Benchmark: AmendExp, StatRev, ReqRev and RiskRev, with LLM judges scoring each output
against the paper's rubrics (task.py), the data schemas, prompts, deterministic checks and judge-human
agreement."""

from .task import LegalRikaiTask

TASK = LegalRikaiTask
