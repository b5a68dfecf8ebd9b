"""LegalEval-Q: candidate answers, an evaluation LLM's Comment and Conclusion, and a regression scorer."""

from offline_eval.tasks.legalevalq.task import LegalEvalQTask

TASK = LegalEvalQTask
