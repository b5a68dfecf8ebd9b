"""The one rule that resolves a model's relative paths (its weights, a variant's file and adapter, a chat template
file, its engine's path keys): against the folder of the config that names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offline_eval.inference.backends.chat import normalize_setting
from offline_eval.inference.backends.registry import get_engine
from offline_eval.runtime.errors import InputError, is_url


def resolve_path(base: Path, value: str) -> str:
    """A relative path against the config file's folder; an absolute path or a URL (refused later) as given."""
    if is_url(value):
        return value
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else base / p)


def resolve_model_paths(raw: Any, base: Path) -> Any:
    """A model as written (under `models:` or a task's judges and evaluators): its path, each variant's file, a
    chat template that is a file, and the path keys its engine declares (a served model's tokenizer), resolved
    against `base`. The one place relative paths of a model are resolved."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    if isinstance(out.get("path"), str) and out["path"]:
        out["path"] = resolve_path(base, out["path"])
    tpl = out.get("chat_template")
    if isinstance(tpl, str) and normalize_setting(tpl) not in (None, "none") and "{" not in tpl:  # a file
        out["chat_template"] = resolve_path(base, tpl)
    if isinstance(out.get("variants"), dict):
        out["variants"] = {
            k: {**v, **{f: resolve_path(base, v[f]) for f in ("file", "adapter") if isinstance(v.get(f), str)}}
            if isinstance(v, dict)
            else v
            for k, v in out["variants"].items()
        }
    try:
        engine = get_engine(str(out.get("backend")))
    except InputError:
        return out  # the backend validator names the problem
    for key in engine.path_options:
        if isinstance(out.get(key), str):
            out[key] = resolve_path(base, out[key])
    return out
