"""Inference engines behind one protocol, found by the registry (each module declares its ENGINE); an engine's library
is imported only when a model of it loads."""

from offline_eval.inference.backends.base import Backend
from offline_eval.inference.backends.registry import load_backend
from offline_eval.inference.backends.spec import LoadSpec

__all__ = ["Backend", "LoadSpec", "load_backend"]
