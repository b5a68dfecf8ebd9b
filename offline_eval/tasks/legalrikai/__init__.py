"""LegalRikai Open Benchmark: AmendExp, StatRev, ReqRev and RiskRev, with LLM judges scoring each output
against the paper's rubrics (task.py), the data schemas, prompts, deterministic checks and judge-human
agreement."""

from offline_eval.tasks.legalrikai.task import LegalRikaiTask

TASK = LegalRikaiTask
