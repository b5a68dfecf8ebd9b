"""Which library turns a constraint into the token mask: the names models.yaml may give and the one-line refusals.
Each engine declares the backends it runs (`Declared.constraint_backends`, its default first); the engines build
the masks (constrained/masks.py's matchers in their own masks.py, and vLLM itself)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

AUTO = "auto"
# name -> the Python module it needs and the extra that installs it
LIBRARIES = {
    "xgrammar": ("xgrammar", "hf"),
    "guidance": ("llguidance", "guidance"),
    "outlines": ("outlines_core", "outlines"),
    "gbnf": ("llama_cpp", "llamacpp"),
}
NAMES = (AUTO, *LIBRARIES)


def normalized(own: tuple[str, ...], requested: str | None) -> str | None:
    """The backend a load names in its store key: None for `auto`, absent, or the engine's own default, so a config
    that leaves the choice to the engine keeps the keys it had before backends could be chosen."""
    if requested in (None, AUTO) or (own and requested == own[0]):
        return None
    return requested


def resolved(own: tuple[str, ...], requested: str | None) -> str | None:
    """The backend that actually runs (`auto` resolved; None: the engine does not choose, its server does)."""
    return normalized(own, requested) or (own[0] if own else None)


def backend_problem(engine: str, requested: str | None, engines: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why `requested` cannot run on `engine` (None: it can), in one line. `engines`: each engine's backends."""
    if requested in (None, AUTO):
        return None
    if requested not in NAMES:
        return f"unknown constraint backend '{requested}'; valid: {', '.join(NAMES)}"
    own = engines.get(engine, ())
    if not own:
        return (
            f"the {engine} engine's server chooses its own constraint backend (vLLM: "
            f"`vllm serve --structured-outputs-config.backend {requested}`); leave constraint_backend out"
        )
    if requested not in own:
        where = ", ".join(e for e, names in engines.items() if requested in names and e != "fake")
        return (
            f"the {engine} engine runs the constraint backends {', '.join(own)} ({own[0]} is its auto); "
            f"{requested} runs on {where}"
        )
    module, extra = LIBRARIES[requested]
    if importlib.util.find_spec(module) is None:
        return f"constraint backend {requested} needs {module}: pip install 'offline-eval[{extra}]'"
    return None
