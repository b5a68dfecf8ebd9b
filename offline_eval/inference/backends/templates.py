"""The chat template an engine will prompt a model with, read from the model's files without loading it: by the
engine's registry entry (a served model applies the server's own; GGUF and HF folders carry their own)."""

from __future__ import annotations

import struct

from offline_eval.inference.backends.chat import (
    NONE,
    PromptFormat,
    choose_template,
    gguf_chat_template,
    hf_folder_chat_template,
    normalize_setting,
)
from offline_eval.inference.backends.registry import get_engine
from offline_eval.runtime.errors import InputError


def model_prompt_format(value: str | None, backend: str, path: str) -> PromptFormat:
    """What an engine will prompt this model with, read from its files without loading it."""
    setting = normalize_setting(value)
    if setting == NONE:
        return "plain"
    if setting is not None or get_engine(backend).remote:  # a server applies its own chat template
        return "chat"
    try:
        own = own_chat_template(backend, path)
    except (OSError, ValueError, struct.error) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InputError(f"cannot read the model's chat template: {type(e).__name__}: {e}", file=path) from None
    return "chat" if own else "plain"


def model_chat_template(value: str | None, backend: str, path: str) -> str | None:
    """The template text an engine prompts this model with (None: the plain format, or a served model, which
    applies the server's own), read from its files without loading it."""
    if get_engine(backend).remote:
        return None
    try:
        own = own_chat_template(backend, path) if normalize_setting(value) is None else None
    except (OSError, ValueError, struct.error):
        own = None  # unreadable: loading the engine names the problem in its run
    return choose_template(value, own)


def own_chat_template(backend: str, path: str) -> str | None:
    """The chat template the model's own files carry, by the kind of weights the engine reads."""
    weights = get_engine(backend).weights
    if weights == "gguf":
        return gguf_chat_template(path)
    if weights == "hf":
        return hf_folder_chat_template(path)
    return None
