"""LegalEval-Q: candidate answers, an evaluation LLM's Comment and Conclusion, and a regression scorer."""

from .task import LegalEvalQTask

TASK = LegalEvalQTask
