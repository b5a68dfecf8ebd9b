"""How a chat request becomes prompt text, shared by every engine and the dry-run planner.

models.yaml's `chat_template` (and `run --chat-template`) is one of:
- `auto` (the default): the model's own chat template; a model without one gets the plain format;
- `none`: always the plain format (base models);
- a file (.jinja, .j2, ...) or the Jinja template text itself.

The plain format, for models that have no chat template:

    <system content>                      each system message, then a blank line
                                          (blank line)
    質問：<user content>                  each user message
    回答：<assistant content>             each assistant message (few-shot answers), then a blank line
                                          (blank line)
    質問：<user content>
    回答：                                the answer cue: the prompt ends here

It carries no special tokens; the engine adds BOS where the model's tokenizer asks for it.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from offline_eval.inference.requests import Request
from offline_eval.runtime.errors import InputError

AUTO, NONE = "auto", "none"
PLAIN_QUESTION, PLAIN_ANSWER = "質問：", "回答："
PromptFormat = Literal["chat", "plain"]

_PATH_LIKE = re.compile(r"(\.(jinja2?|j2)\s*$)|[/\\]")


def render_plain(messages: Sequence[dict[str, str]]) -> str:
    """Chat messages in the plain format above. A last assistant message is continued, not answered."""
    parts: list[str] = []
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "system":
            parts.append(f"{content}\n\n")
        elif role == "user":
            parts.append(f"{PLAIN_QUESTION}{content}\n")
        elif role == "assistant":
            parts.append(f"{PLAIN_ANSWER}{content}\n\n")
        else:
            raise InputError(f"the plain prompt format has no place for role '{role}'", field="chat_template")
    if messages and messages[-1]["role"] == "assistant":
        return "".join(parts)[:-2]
    return "".join(parts) + PLAIN_ANSWER


def render_chat(
    template: str, messages: list[dict[str, str]], bos_token: str = "", eos_token: str = "", **options: Any
) -> str:
    """Render a HF-style Jinja chat template with the generation prompt appended; `options` are the template's
    own keywords (enable_thinking, reasoning_effort)."""
    return _compiled(template).render(
        **options, messages=messages, add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token
    )


def render_request(r: Request, template: str | None, bos_token: str = "", eos_token: str = "") -> str:
    """A request as prompt text under a Jinja chat template, the plain format (template None) or the raw
    prompt, with its prefill after it: how every engine without an HF tokenizer renders."""
    if r.messages is None:
        return r.continued(r.prompt or "")
    if template is None:
        return r.continued(render_plain(r.message_dicts()))
    return r.continued(render_chat(template, r.message_dicts(), bos_token, eos_token, **r.template_options()))


@lru_cache(maxsize=32)
def _compiled(template: str) -> Any:
    return _jinja_env().from_string(template)


_ENV = None
# The day a template that prints today's date (gpt-oss's "Current date:") is rendered on, on every engine: a
# prompt, and so its stored answer, must not change at midnight.
TEMPLATE_DATE = date(2026, 1, 1)


def template_strftime(fmt: str) -> str:
    return TEMPLATE_DATE.strftime(fmt)


def _jinja_env():
    """The environment transformers renders chat templates in: sandboxed, trim_blocks, lstrip_blocks, loop
    controls, and its {% generation %} block (rendered as its body)."""
    global _ENV
    if _ENV is None:
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        class GenerationBlock(Extension):
            tags = {"generation"}

            def parse(self, parser):
                lineno = next(parser.stream).lineno
                body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
                return nodes.Scope(body).set_lineno(lineno)

        def raise_exception(msg: str) -> None:
            raise InputError(f"chat template refused the messages: {msg}")

        _ENV = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationBlock]
        )
        _ENV.globals["raise_exception"] = raise_exception
        _ENV.globals["strftime_now"] = template_strftime
    return _ENV


def normalize_setting(value: str | None) -> str | None:
    """`auto` (any case, or unset) -> None; `none` (any case) -> "none"; anything else as given."""
    if value is None or value.strip().lower() in ("", AUTO):
        return None
    return NONE if value.strip().lower() == NONE else value


def looks_like_path(value: str) -> bool:
    return "{" not in value and bool(_PATH_LIKE.search(value))


def chat_template_text(value: str | None, base: Path | None = None) -> str | None:
    """The template text a chat_template value names: None for auto / none, else the file's text or the value
    itself. A missing file, a value that is neither a file nor a template, or a Jinja syntax error raise
    ValueError with a message for the user (the caller names the field)."""
    value = normalize_setting(value)
    if value is None or value == NONE:
        return None
    path = resolve_template_path(value, base)
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read the chat template file {path}: {e}") from None
        source = str(path)
    elif "{" in value:
        text, source = value, "the template text"
    elif looks_like_path(value):
        raise ValueError(f"chat template file not found: {value}")
    else:
        raise ValueError(f"{value!r} is not auto, none, an existing template file or Jinja template text")
    check_template_syntax(text, source)
    return text


def resolve_template_path(value: str, base: Path | None = None) -> Path | None:
    """The file a chat_template value names, if it is one that exists (relative paths against `base`)."""
    if "{" in value:
        return None
    p = Path(value).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    return p if p.is_file() else None


def check_template_syntax(text: str, source: str) -> None:
    from jinja2 import TemplateSyntaxError, meta

    try:
        ast = _jinja_env().parse(text)
        _compiled(text)
    except TemplateSyntaxError as e:
        raise ValueError(f"Jinja syntax error on line {e.lineno} of {source}: {e.message}") from None
    if "messages" not in meta.find_undeclared_variables(ast):
        raise ValueError(f"{source} never uses `messages`, so every prompt would be the same text")


def checked_setting(value: str | None, base: Path | None = None) -> str | None:
    """A chat_template value checked (the file exists, the template parses) and normalised: None (auto),
    "none", an absolute file path, or the template text. Raises ValueError naming what is wrong."""
    setting = normalize_setting(value)
    if setting is None or setting == NONE:
        return setting
    chat_template_text(setting, base)
    path = resolve_template_path(setting, base)
    return str(path.resolve()) if path is not None else setting


def spec_template(value: str | None) -> str | None:
    """The load spec's chat_template: a file's text in place of its path, so that editing the file changes the
    store key; auto stays None and none stays "none"."""
    setting = normalize_setting(value)
    return setting if setting is None or setting == NONE else read_chat_template(setting)


def read_chat_template(value: str | None) -> str | None:
    """chat_template's value as template text (None for auto / none); bad values are a one-line InputError."""
    try:
        return chat_template_text(value)
    except ValueError as e:
        raise InputError(str(e), field="chat_template") from None


def choose_template(value: str | None, own: str | None) -> str | None:
    """The template a model is prompted with: its own under auto, the given one, or None for the plain format."""
    setting = normalize_setting(value)
    if setting is None:
        return own or None
    if setting == NONE:
        return None
    return read_chat_template(setting)


def hf_own_template(tokenizer: Any) -> str | None:
    """An HF tokenizer's own chat template (the default one where it has several), or None."""
    t = getattr(tokenizer, "chat_template", None)
    if isinstance(t, dict):
        t = t.get("default") or next(iter(t.values()), None)
    return t or None


def hf_render(tokenizer: Any, chat_template: str | None, r: Request) -> str:
    """A request as prompt text under an HF tokenizer: the chat template, the plain format (template None),
    or the raw prompt."""
    if r.messages is None or chat_template is None:
        return render_request(r, None)
    return r.continued(
        tokenizer.apply_chat_template(
            r.message_dicts(),
            tokenize=False,
            add_generation_prompt=True,
            chat_template=chat_template,
            strftime_now=template_strftime,
            **r.template_options(),
        )
    )


def adds_special_tokens(r: Request, chat_template: str | None) -> bool:
    """A chat template writes BOS itself; a raw or plain prompt gets the tokenizer's own special tokens."""
    return r.messages is None or chat_template is None


def hf_encode(tokenizer: Any, chat_template: str | None, requests: Sequence[Request]) -> list[list[int]]:
    return [
        tokenizer.encode(
            hf_render(tokenizer, chat_template, r), add_special_tokens=adds_special_tokens(r, chat_template)
        )
        for r in requests
    ]


def hf_folder_chat_template(folder: str) -> str | None:
    """The default chat template an HF tokenizer folder carries, as transformers finds it."""
    p = Path(folder)
    if (p / "chat_template.jinja").is_file():
        return (p / "chat_template.jinja").read_text(encoding="utf-8") or None
    for name, key in (("chat_template.json", "chat_template"), ("tokenizer_config.json", "chat_template")):
        f = p / name
        if f.is_file():
            t = json.loads(f.read_text(encoding="utf-8")).get(key)
            if isinstance(t, list):  # named templates
                t = next((x.get("template") for x in t if x.get("name") == "default"), None)
            if t:
                return str(t)
    return None


_GGUF_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


_GGUF_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_chat_template(path: str, key: str = "tokenizer.chat_template") -> str | None:
    """A GGUF's chat template from its header, read without loading the model."""
    value = gguf_metadata(path, {key}).get(key)
    return value if isinstance(value, str) and value else None


def gguf_metadata(path: str, keys: set[str]) -> dict[str, Any]:
    """The GGUF header's values of `keys` that are strings or numbers, read without loading the model."""
    found: dict[str, Any] = {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return found
        _version, _, n_kv = struct.unpack("<IQQ", f.read(20))

        def u64() -> int:
            return struct.unpack("<Q", f.read(8))[0]

        def skip(vtype: int) -> None:
            if vtype == _GGUF_STRING:
                f.seek(u64(), 1)
            elif vtype == _GGUF_ARRAY:
                etype, n = struct.unpack("<IQ", f.read(12))
                if etype in _GGUF_SCALARS:
                    f.seek(_GGUF_SCALARS[etype] * n, 1)
                else:
                    for _ in range(n):
                        skip(etype)
            else:
                f.seek(_GGUF_SCALARS[vtype], 1)

        for _ in range(n_kv):
            name = f.read(u64()).decode("utf-8", errors="replace")
            vtype = struct.unpack("<I", f.read(4))[0]
            if name in keys and vtype == _GGUF_STRING:
                found[name] = f.read(u64()).decode("utf-8")
            elif name in keys and vtype in _GGUF_FORMATS:
                found[name] = struct.unpack(_GGUF_FORMATS[vtype], f.read(_GGUF_SCALARS[vtype]))[0]
            else:
                skip(vtype)
            if len(found) == len(keys):
                break
    return found
