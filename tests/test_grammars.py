"""The grammar text each engine gets: strings that strict JSON and UTF-8 accept, and nothing else."""

from __future__ import annotations

import json

import pytest

xgrammar_testing = pytest.importorskip("xgrammar.testing")  # grammar engines: the `hf` extra
accepts = xgrammar_testing._is_grammar_accept_string
pytestmark = pytest.mark.engine

from offline_eval.inference.constrained.grammars import choice_grammar, gbnf, xgrammar_ebnf
from offline_eval.inference.constraints import Choice, JsonSchema, Regex

BOUNDED = JsonSchema(
    {
        "type": "object",
        "properties": {"r": {"type": "string", "maxLength": 8}},
        "required": ["r"],
        "additionalProperties": False,
    }
)
FREE = JsonSchema(
    {"type": "object", "properties": {"r": {"type": "string"}}, "required": ["r"], "additionalProperties": False}
)


@pytest.mark.parametrize("schema", [BOUNDED, FREE], ids=["maxLength", "unbounded"])
def test_xgrammar_json_strings_refuse_control_characters_and_surrogates(schema):
    g = xgrammar_ebnf(schema)
    assert accepts(g, json.dumps({"r": "第9条"}, ensure_ascii=False, separators=(",", ":")))
    assert not accepts(g, '{"r":"a\x01b"}')
    assert not accepts(g, '{"r":"a\nb"}')
    assert not accepts(g, '{"r":"a\ud9a3b"}'.encode("utf-8", "surrogatepass"))
    assert not accepts(g, '{"r": "spaced"}')  # compact separators, as vLLM's disable_any_whitespace


def test_choice_grammar_escapes_and_accepts_only_the_choices():
    c = Choice(["はい", 'い"え', "0"])
    g = choice_grammar(c)
    assert xgrammar_ebnf(c) == g
    for s in c.choices:
        assert accepts(g, s)
    assert not accepts(g, "はいい") and not accepts(g, "")


def test_regex_grammar():
    g = xgrammar_ebnf(Regex(r"第[0-9]{1,3}条"))
    assert accepts(g, "第109条") and not accepts(g, "第1090条") and not accepts(g, "第条")


def test_gbnf_json_rules_are_tightened():
    text = gbnf(BOUNDED)
    char = [line for line in text.splitlines() if line.startswith("char ::=")]
    assert char and "\\x00-\\x1F" in char[0] and "\\uD800-\\uDFFF" in char[0]
    assert 'space ::= ""' in text
    small = gbnf(
        JsonSchema(
            {"type": "object", "properties": {"s": {"type": "integer", "minimum": 1, "maximum": 3}}, "required": ["s"]}
        )
    )
    assert '"1"' in small and '"3"' in small  # llama-cpp-python ignores min/max: the range became an enum


QUOTING = [
    ('{"r":"a\\"b\\\\c"}', True),  # a quote and a backslash, escaped: 5 characters
    ('{"r":"1\\n2\\t3"}', True),  # a line break and a tab, escaped
    ('{"r":"\\u00e9\\u6761"}', True),
    ('{"r":"\\"\\"\\"\\"\\"\\"\\"\\""}', True),  # 8 escaped quotes: 8 characters, maxLength 8
    ('{"r":"\\"\\"\\"\\"\\"\\"\\"\\"\\""}', False),  # 9
    ('{"r":"123456789"}', False),
    ('{"r":"a"b"}', False),  # a bare quote
    ('{"r":"\\x"}', False),  # no such escape
    ('{"r":"\\ud800"}', False),  # half a surrogate pair is no character
]


@pytest.mark.parametrize("text, ok", QUOTING)
def test_a_bounded_string_takes_jsons_escapes_under_every_backend(text, ok):
    """xgrammar's bounded strings took no escape at all, so a judge's rationale with maxLength could not quote a
    statute's 「"」 or break a line, while llguidance and outlines-core let it (issue 62, item 14). Now xgrammar and
    outlines-core (given \\u escapes here) accept and refuse the same strings, and llama.cpp's GBNF character is JSON's (escapes included)."""
    import re

    from offline_eval.inference.constrained.grammars import outlines_regex

    assert accepts(xgrammar_ebnf(BOUNDED), text) is ok
    assert bool(re.fullmatch(outlines_regex(BOUNDED), text)) is ok
    if ok:
        assert len(json.loads(text)["r"]) <= 8
    char = next(line for line in gbnf(BOUNDED).splitlines() if line.startswith("char ::="))
    assert '[\\\\] (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})' in char
