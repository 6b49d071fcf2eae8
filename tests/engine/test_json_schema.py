"""compile_json_schema: outlines-core's regex for a JSON Schema, compiled by our engine; the
matcher accepts exactly the texts the regex fully matches."""

import json
import re

import pytest

from cad_outlines import Matcher, Vocabulary, compile_json_schema
from cad_outlines.engine.json_schema import regex_grammar, schema_regex
from tests.fixture_data import SMALL

SCHEMA = {"type": "object", "required": ["name"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"type": "string"}}, "ok": {"type": "boolean"}}}
TEXTS = ['{"name": "x", "age": 3}', '{"name":"a/b"}', '{"age": 3}', '{"name": "x", "age": 03}',
         '{"name": "x", "tags": ["a", "b"]}', '{"name": "x"} ', '{"name": "\\u00e9t\\u00e9", "ok": false}',
         '{"name": "x", "age": -12, "tags": [], "ok": true}', '{"name": "x", "ok": 1}', '{"name": "q\\"}',
         '{"name": "x",}', '{ "name" : "x" }', '{"name": "x", "age": 3, "age": 4}']


def accepts(m: Matcher, ids: list[int]) -> bool:
    return m.validate(ids) == len(ids) and (m.advance_many(ids) or m.is_accepting())


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from tokenizers import Tokenizer

    path = SMALL / "tokenizers" / "gpt2"
    vocab = Vocabulary.from_tokenizer(path)
    grammar = compile_json_schema(SCHEMA, vocab, cache=tmp_path_factory.mktemp("c"), progress=False)
    return grammar, Tokenizer.from_file(str(path / "tokenizer.json"))


def test_matcher_accepts_what_the_schema_regex_fully_matches(gpt2):
    grammar, tok = gpt2
    rx = schema_regex(SCHEMA)
    verdicts = {}
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        verdicts[text] = accepts(Matcher(grammar), ids)
        assert verdicts[text] == bool(re.fullmatch(rx, text)), text
    assert sum(verdicts.values()) >= 5 and not all(verdicts.values())


def test_a_valid_document_ends_with_eos_only_when_complete(gpt2):
    grammar, tok = gpt2
    m = Matcher(grammar)
    ids = tok.encode('{"name": "x"}', add_special_tokens=False).ids
    m.advance_many(ids[:-1])
    assert not m.allowed_mask()[grammar.eos_token_ids[0]]
    m.advance(ids[-1])
    assert m.allowed_mask()[grammar.eos_token_ids[0]]


def test_schema_as_json_text_or_file_gives_the_same_store(gpt2, tmp_path):
    grammar, _ = gpt2
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    again = compile_json_schema(path, grammar.vocab, cache=False, progress=False)
    assert again.grammar_hash == grammar.grammar_hash


def test_slashes_and_line_breaks_are_escaped_for_lark():
    assert regex_grammar('a/b\\/c\\\\/d\n') == 'start: JSON\nJSON: /a\\/b\\/c\\\\\\/d\\n/\n'
    assert re.fullmatch("a/b\\/c\\\\/d\n", "a/b/c\\/d\n")


def test_bad_schemas_are_value_errors():
    with pytest.raises(ValueError, match="not valid JSON"):
        schema_regex("{not json")
    with pytest.raises(ValueError, match="outlines-core cannot"):
        schema_regex({"type": "no-such-type"})
