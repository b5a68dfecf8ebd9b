"""Inference engines behind one protocol, found by the registry (each module declares its ENGINE); an engine's library
is imported only when a model of it loads."""

from .base import Backend
from .registry import load_backend
from .spec import LoadSpec

__all__ = ["Backend", "LoadSpec", "load_backend"]
