"""The grammar text each engine gets: strings that strict JSON and UTF-8 accept, and nothing else."""

from __future__ import annotations

import json

import pytest

xgrammar_testing = pytest.importorskip("xgrammar.testing")  # grammar engines: the `hf` extra
accepts = xgrammar_testing._is_grammar_accept_string
pytestmark = pytest.mark.engine

from offline_eval.inference.backends.grammars import choice_grammar, gbnf, xgrammar_ebnf
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
