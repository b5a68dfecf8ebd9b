"""Inference engines behind one protocol. Each engine module is imported only when a run needs it."""

from .base import Backend, LoadSpec, load_backend

__all__ = ["Backend", "LoadSpec", "load_backend"]
