"""Inference engines behind one protocol. Each engine module is imported only when a run needs it."""

from .base import Backend
from .registry import load_backend
from .spec import LoadSpec

__all__ = ["Backend", "LoadSpec", "load_backend"]
