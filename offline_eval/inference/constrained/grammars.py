"""Constraint -> grammar text, for the engines that take grammars (xgrammar EBNF, llama.cpp GBNF).

Both JSON-schema converters we rely on let raw control characters (and xgrammar also UTF-8-encoded
surrogates) into some string values, which makes the output invalid JSON. The string rules are tightened here, once, so every backend decodes only
strings that strict JSON parsing accepts.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

from offline_eval.inference.constraints import Choice, Constraint, JsonSchema, Regex


def _literal(s: str) -> str:
    # JSON string escapes (\", \\, \n, \uXXXX) are valid in both GBNF and xgrammar EBNF literals.
    return json.dumps(s, ensure_ascii=False)


def choice_grammar(c: Choice) -> str:
    return "root ::= " + " | ".join(_literal(x) for x in c.choices)


# xgrammar 0.2.8: strings with minLength/maxLength use [^"\\\r\n], which admits \x00-\x1f and no escape at all
# (a bounded rationale could not quote, or hold a line break, where llguidance and outlines-core let it); and every
# string rule admits UTF-8-encoded surrogates (U+D800-U+DFFF), which are not valid UTF-8 and decode to U+FFFD.
# A bounded string's character is here what JSON calls one: a strict character or one escape (\u of a surrogate
# left out: alone it is not a character), so maxLength counts characters as the schema means them.
_XGR_STRICT_CHAR = r"[^\0-\x1f\"\\\ud800-\udfff]"
_XGR_BOUNDED_CHAR = (
    "(" + _XGR_STRICT_CHAR + r' | ("\\" ([\"\\/bfnrt] | ("u" ([0-9A-Ca-cE-Fe-f] [0-9A-Fa-f]{3} | [Dd] [0-7] '
    r"[0-9A-Fa-f]{2})))))"
)
_XGR_LOOSE_CHARS = (r"[^\"\\\r\n]", r"[^\0-\x1f\"\\\r\n]")


@lru_cache(maxsize=256)
def xgrammar_ebnf(c: Constraint) -> str:
    """EBNF for xgrammar (vLLM's `grammar=` and our transformers logits processor)."""
    import xgrammar as xgr

    if isinstance(c, Choice):
        return choice_grammar(c)
    if isinstance(c, Regex):
        return str(xgr.Grammar.from_regex(c.pattern))
    if isinstance(c, JsonSchema):
        g = str(xgr.Grammar.from_json_schema(c.schema_json, any_whitespace=False, separators=(",", ":")))
        for loose in _XGR_LOOSE_CHARS:
            g = g.replace(loose, _XGR_BOUNDED_CHAR)
        return g
    raise TypeError(f"unknown constraint {c!r}")


_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


@lru_cache(maxsize=256)
def guidance_grammar(c: Constraint) -> str:
    """llguidance's grammar for `c` (no whitespace in JSON, as the other backends)."""
    import llguidance as llg

    if isinstance(c, Choice):
        return str(llg.grammar_from("choice", json.dumps(list(c.choices))))
    if isinstance(c, Regex):
        return str(llg.LLMatcher.grammar_from_regex(c.pattern))
    if isinstance(c, JsonSchema):
        return str(llg.LLMatcher.grammar_from_json_schema(c.schema_json, overrides=_JSON_OPTIONS))  # type: ignore[arg-type]
    raise TypeError(f"unknown constraint {c!r}")


@lru_cache(maxsize=256)
def outlines_regex(c: Constraint) -> str:
    """The regular expression outlines-core matches for `c` (bounded integers as enums, as the GBNF has them:
    outlines-core's converter drops minimum and maximum)."""
    from outlines_core import json_schema

    if isinstance(c, Choice):
        return "(" + "|".join(re.escape(x) for x in c.choices) + ")"
    if isinstance(c, Regex):
        return c.pattern
    schema = json.dumps(bounded_ints_as_enums(c.schema), ensure_ascii=False)
    regex = str(json_schema.build_regex_from_schema(schema, whitespace_pattern=""))
    return regex.replace(_OUTLINES_ESCAPE, _OUTLINES_ESCAPES)


# outlines-core's JSON strings take no \u escape; the other backends' do (a surrogate's half left out, as above).
_OUTLINES_ESCAPE = r'\\["\\/bfnrt]'
_OUTLINES_ESCAPES = r'\\(?:["\\/bfnrt]|u(?:[0-9A-Ca-cE-Fe-f][0-9A-Fa-f]{3}|[Dd][0-7][0-9A-Fa-f]{2}))'


_COMPILERS = {"xgrammar": xgrammar_ebnf, "guidance": guidance_grammar, "outlines": outlines_regex}


def compiled_text(c: Constraint, library: str | None) -> str | None:
    """The text `library` compiles `c` from, as offline-eval hands it over (None: no library of ours compiles it,
    a server does). Its digest is in the store key of every constrained output (Runner): a change to these
    converters, or to the library's own, asks again instead of serving answers decoded under other rules."""
    if library is None:
        return None
    compile_ = gbnf if library == "gbnf" else _COMPILERS[library]
    return compile_(c)


def keyed_before_digests(c: Constraint, library: str | None) -> bool:
    """Whether an output stored before constrained keys held the grammar's digest (2026-12-07) was decoded under
    the text compiled_text gives today: every constraint but xgrammar's bounded JSON strings (which admit escapes
    since) and outlines-core's JSON strings (which admit \\u since). Those older outputs are served; the others
    are asked again."""
    if not isinstance(c, JsonSchema):
        return True
    if library == "outlines":
        return '"string"' not in c.schema_json
    return not (library == "xgrammar" and any(k in c.schema_json for k in ('"maxLength"', '"minLength"')))


@lru_cache(maxsize=256)
def gbnf(c: Constraint) -> str:
    """GBNF for llama.cpp."""
    from llama_cpp import llama_grammar as lg

    if isinstance(c, Choice):
        return choice_grammar(c)
    if isinstance(c, JsonSchema):
        conv = _gbnf_converter(lg)
        conv.visit(conv.resolve_refs(bounded_ints_as_enums(c.schema), "stdin"), "")
        return _GBNF_SPACE.sub('space ::= ""', _tighten_gbnf_chars(conv.format_grammar()))
    if isinstance(c, Regex):
        conv = lg.SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=True)
        conv.visit({"type": "string", "pattern": _anchor(c.pattern)}, "")
        return _tighten_gbnf_chars(conv.format_grammar())
    raise TypeError(f"unknown constraint {c!r}")


# llama.cpp's parser refuses a grammar whose repetitions expand past 2,000 rules, and llama-cpp-python's
# converter writes maxLength N as N nested optional groups: maxLength 1200 was refused (and the refusal
# crashed the process). Bounded strings are rewritten into chunks of about sqrt(N) characters instead.
_DIRECT_MAX = 100


def _gbnf_converter(lg: Any) -> Any:
    class Converter(lg.SchemaConverter):
        def visit(self, schema: dict[str, Any], name: str) -> str:
            bounded = ("minLength" in schema or "maxLength" in schema) and schema.get("type") == "string"
            if not bounded or any(k in schema for k in ("pattern", "format", "enum", "const", "$ref")):
                return str(super().visit(schema, name))
            char = self._add_primitive("char", lg.PRIMITIVE_RULES["char"])
            rule_name = name + "-" if name in lg.RESERVED_NAMES else name or "root"
            body = self._bounded(rule_name, char, int(schema.get("minLength", 0)), schema.get("maxLength"))
            return str(self._add_rule(rule_name, r'"\"" ' + body + r' "\"" space'))

        def _bounded(self, rule: str, char: str, lo: int, hi: int | None) -> str:
            parts = [self._exactly(rule, char, lo)] if lo else []
            if hi is None:
                parts.append(f"{char}*")
            elif hi - lo > _DIRECT_MAX:
                n = hi - lo
                size = math.isqrt(n - 1) + 1
                q, r = divmod(n, size)
                chunk = self._add_rule(f"{rule}-chunk", f"{char}{{{size}}}")
                # 0 .. q*size-1 characters, or q full chunks and 0 .. r more: exactly 0 .. n in all.
                tail = f" {char}{{0,{r}}}" if r else ""
                parts.append(f"({chunk}{{0,{q - 1}}} {char}{{0,{size - 1}}} | {chunk}{{{q}}}{tail})")
            elif hi > lo:
                parts.append(f"{char}{{0,{hi - lo}}}")
            return " ".join(parts) if parts else ""

        def _exactly(self, rule: str, char: str, n: int) -> str:
            if n <= _DIRECT_MAX:
                return f"{char}{{{n}}}"
            size = math.isqrt(n)
            q, r = divmod(n, size)
            chunk = self._add_rule(f"{rule}-min", f"{char}{{{size}}}")
            return f"{chunk}{{{q}}}" + (f" {char}{{{r}}}" if r else "")

    return Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def bounded_ints_as_enums(node: object) -> object:
    """llama-cpp-python's converter ignores minimum/maximum; a small closed range becomes an enum."""
    if isinstance(node, list):
        return [bounded_ints_as_enums(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: bounded_ints_as_enums(v) for k, v in node.items()}
    lo, hi = out.get("minimum"), out.get("maximum")
    if out.get("type") == "integer" and isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo <= 256:
        out = {k: v for k, v in out.items() if k not in ("type", "minimum", "maximum")}
        out["enum"] = list(range(lo, hi + 1))
    return out


_GBNF_SPACE = re.compile(r"^space ::= .*$", re.M)


def _anchor(p: str) -> str:
    return p if p.startswith("^") and p.endswith("$") else f"^({p})$"


_GBNF_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F\uD800-\uDFFF] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_GBNF_CHAR = re.compile(r"^char ::= .*$", re.M)


def _tighten_gbnf_chars(text: str) -> str:
    return _GBNF_CHAR.sub(lambda _: _GBNF_STRICT_CHAR, text)
