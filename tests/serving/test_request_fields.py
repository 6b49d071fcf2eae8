"""The request fields users already send (OpenAI's response_format, vLLM's structured_outputs) as our
constraint, without vLLM: the one translation (cad_outlines.serving.constraints.request_fields), what each
field becomes and the 400s naming what is refused, a JSON Schema compiled by the gate's worker, and the
middleware rewriting a chat body. The same over HTTP against a real server: tests/serving/test_serving.py
and test_serving_attacks.py."""

import asyncio
import json
import re
from types import SimpleNamespace

import lark
import pytest

from cad_outlines import Matcher, Vocabulary, compile_json_schema
from cad_outlines.limits import Limits
from cad_outlines.serving import ConstraintRequest, GrammarSpec, RequestError
from cad_outlines.serving.constraints.admission import AdmissionError, admit
from cad_outlines.serving.constraints.grammar_library import GrammarLibrary, check_grammar, remove_schema_builds
from cad_outlines.serving.constraints.request_fields import (
    choice_grammar, closed_objects, constraint_of_fields, gbnf_choices, regex_request_grammar, rewrite_body,
    take_structured_outputs)
from cad_outlines.serving.limits import ServerLimits
from tests.fixture_data import SMALL
from tests.helpers import encode

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "kind": {"enum": ["cat", "dog"]}}, "required": ["kind", "name"]}


def test_each_field_becomes_one_constraint():
    def spec(**fields):
        return constraint_of_fields(**fields).spec

    by_format = spec(response_format={"type": "json_schema", "json_schema": {"name": "pet", "schema": SCHEMA,
                                                                             "strict": True}})
    assert json.loads(by_format.schema) == SCHEMA and by_format.name is None and by_format.text is None
    assert list(json.loads(by_format.schema)["properties"]) == ["name", "kind"]  # the order is the schema's
    assert spec(structured_outputs={"json": SCHEMA}) == by_format
    assert spec(structured_outputs={"json": json.dumps(SCHEMA, indent=2)}) == by_format  # JSON text, any spacing
    assert spec(response_format={"type": "json_object"}) == spec(structured_outputs={"json_object": True})
    assert json.loads(spec(response_format={"type": "json_object"}).schema) == {"type": "object"}
    assert constraint_of_fields(response_format={"type": "text"}) is None
    assert constraint_of_fields(structured_outputs={"disable_any_whitespace": False}) is None
    assert spec(structured_outputs={"grammar": 'start: "a"'}) == GrammarSpec(text='start: "a"')
    assert spec(structured_outputs={"regex": "[a-z]+"}).text == regex_request_grammar("[a-z]+")
    assert spec(structured_outputs={"choice": ["yes", "no"]}).text == choice_grammar(["yes", "no"])
    assert constraint_of_fields(structured_outputs={"choice": ["a"]}).field == "structured_outputs.choice"
    for fields in ({"response_format": {"type": "json_object"}}, {"structured_outputs": {"regex": "x"}}):
        request = ConstraintRequest(grammar=spec(**fields))
        assert ConstraintRequest.from_extra_args(request.to_extra_args()) == request  # cad_* keys round trip


def _accepts(grammar: str, text: str) -> bool:
    try:
        lark.Lark(grammar, parser="lalr", lexer="basic").parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


@pytest.mark.parametrize("regex, yes, no", [
    (r"[0-9]{3}-[a-z]{2}", ["123-ab"], ["123-abc", "12-ab", ""]),
    (r"^(yes|no)$", ["yes", "no"], ["yes\n", "$", "^yes"]),  # anchors at the ends: the whole output anyway
    (r"a\$", ["a$"], ["a"]),  # an escaped dollar stays
    (r"a\\$", ["a\\"], ["a\\$"]),  # an escaped backslash, then the anchor
    (r"\Aa/b\Z", ["a/b"], ["a\\/b"]),  # lark's regex delimiter escaped
])
def test_a_regex_is_one_terminal_matching_the_whole_output(regex, yes, no):
    grammar = regex_request_grammar(regex)
    assert all(_accepts(grammar, t) for t in yes) and not any(_accepts(grammar, t) for t in no)


def test_a_choice_is_exactly_one_of_the_strings():
    words = ['say "hi"', "a|b", "back\\slash", "new\nline", "naïve", "a", "ab"]
    grammar = choice_grammar(words)
    assert all(_accepts(grammar, w) for w in words)
    assert not any(_accepts(grammar, w) for w in ["b", "abab", "say hi", "a|", "backslash", ""])
    assert _accepts(choice_grammar(["", "x"]), "") and _accepts(choice_grammar(["", "x"]), "x")


def test_a_gbnf_choice_is_read_as_that_choice():
    """vLLM turns structured_outputs.choice into a GBNF rule before a logits processor sees it (on an
    in-process engine): that rule, escapes and all, is the same choice again; other GBNF is not Lark."""
    words = ['say "hi"', "back\\slash", "new\nline\t", "del\x7f", "naïve", "", "|", "u\\u0041"]
    vllm_wrote = r'root ::= "say \"hi\"" | "back\\slash" | "new\nline\t" | "del\u007f" | "naïve" | "" | "|" | "u\\u0041"'
    assert gbnf_choices(vllm_wrote) == words
    assert constraint_of_fields(structured_outputs={"grammar": vllm_wrote}).spec.text == choice_grammar(words)
    assert gbnf_choices('root ::= "a" | b') is None and gbnf_choices('start: "a" | "b"') is None


def test_disable_additional_properties_closes_objects_as_vllm_does():
    nested = {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}}},
        "b": {"type": "object", "properties": {"y": {}}, "additionalProperties": True},
        "c": {"type": "array", "items": {"patternProperties": {"^p": {}}}},
        "d": {"anyOf": [{"properties": {"z": {}}}, {"type": "object"}]}},
        "$defs": {"n": {"properties": {"v": {}}}}, "not": {"properties": {"w": {}}}}
    closed = closed_objects(nested)
    F = {"additionalProperties": False}
    assert closed == {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"type": "integer"}}, **F},
        "b": {"type": "object", "properties": {"y": {}}, "additionalProperties": True},
        "c": {"type": "array", "items": {"patternProperties": {"^p": {}}, **F}},
        "d": {"anyOf": [{"properties": {"z": {}}, **F}, {"type": "object"}]}},
        "$defs": {"n": {"properties": {"v": {}}, **F}}, "not": {"properties": {"w": {}}, **F}, **F}
    assert "additionalProperties" not in nested and "additionalProperties" not in nested["properties"]["a"]
    assert list(closed["properties"]) == ["a", "b", "c", "d"]  # the property order is kept

    open_, shut = (constraint_of_fields(structured_outputs={"json": json.dumps(SCHEMA), **opt}).spec
                   for opt in ({}, {"disable_additional_properties": True}))
    assert json.loads(shut.schema) == {**SCHEMA, "additionalProperties": False} and json.loads(open_.schema) == SCHEMA
    kept = constraint_of_fields(structured_outputs={"json": SCHEMA, "disable_additional_properties": False})
    assert open_ == kept.spec
    # with a regex, choice or grammar there are no objects to close (vLLM ignores it there too)
    assert constraint_of_fields(structured_outputs={"regex": "a", "disable_additional_properties": True}).spec == \
        constraint_of_fields(structured_outputs={"regex": "a"}).spec
    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")

    def accepts(schema_text, text):
        g = compile_json_schema(schema_text, vocab, cache=False)
        ids = encode(vocab, text.encode())
        m = Matcher(g)
        return m.validate(ids) == len(ids) and (m.advance_many(ids) or True) and m.is_accepting()

    for text, in_open, in_shut in [('{"name": "x", "kind": "cat"}', True, True),
                                   ('{"name": "x", "kind": "cat", "age": 3}', True, False),
                                   ('{"name": "x", "kind": "cow"}', False, False)]:
        assert (accepts(open_.schema, text), accepts(shut.schema, text)) == (in_open, in_shut), text


@pytest.mark.parametrize("fields, words", [
    ({"response_format": {"type": "structural_tag", "format": {}}}, ["structural_tag"]),
    ({"response_format": {"type": "xml"}}, ["response_format.type"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, ["response_format.json_schema.schema"]),
    ({"response_format": "json"}, ["response_format"]),
    ({"structured_outputs": {"structural_tag": "{}"}}, ["structured_outputs.structural_tag"]),
    ({"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": "yes"}},
     ["structured_outputs.disable_any_whitespace must be true or false"]),
    ({"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True, "whitespace_pattern": " "}},
     ["disable_any_whitespace or structured_outputs.whitespace_pattern, not both"]),
    ({"structured_outputs": {"json": SCHEMA, "whitespace_pattern": 3}}, ["whitespace_pattern must be a string"]),
    ({"structured_outputs": {"json": SCHEMA, "whitespace_pattern": "( *"}},
     ["structured_outputs.whitespace_pattern is not a valid regex"]),
    ({"structured_outputs": {"json": SCHEMA, "disable_additional_properties": "yes"}},
     ["structured_outputs.disable_additional_properties must be true or false"]),
    ({"structured_outputs": {"regex": "a", "whitespace_pattern": "("}}, ["whitespace_pattern"]),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}},
     ["structured_outputs.regex and structured_outputs.choice"]),
    ({"structured_outputs": {"regex": "a"}, "guided": {"choice": ["a"]}}, ["structured_outputs.regex", "guided_choice"]),
    ({"guided": {"json": SCHEMA, "whitespace_pattern": " " * 300}}, ["guided_whitespace_pattern", "max_string_chars"]),
    ({"structured_outputs": {"regx": "a"}}, ["structured_outputs.regx"]),
    ({"structured_outputs": {"json": [1]}}, ["structured_outputs.json"]),
    ({"structured_outputs": {"json": "{not json"}}, ["structured_outputs.json", "not valid JSON"]),
    ({"structured_outputs": {"json": "[1]"}}, ["structured_outputs.json", "object"]),
    ({"structured_outputs": {"json_object": False}}, ["structured_outputs.json_object"]),
    ({"structured_outputs": {"choice": []}}, ["structured_outputs.choice"]),
    ({"structured_outputs": {"choice": ["a", 1]}}, ["structured_outputs.choice"]),
    ({"structured_outputs": {"choice": [""]}}, ["structured_outputs.choice"]),
    ({"structured_outputs": {"regex": ""}}, ["structured_outputs.regex"]),
    ({"structured_outputs": {"grammar": 7}}, ["structured_outputs.grammar"]),
    ({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}},
     ["response_format", "structured_outputs.regex", "not both"]),
])
def test_what_cannot_be_honoured_is_refused_naming_the_field(fields, words):
    with pytest.raises(RequestError) as info:
        constraint_of_fields(**fields)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_hostile_sizes_are_refused_at_admission_naming_the_field_and_the_limit():
    tight = ServerLimits(max_schema_bytes=2000, max_grammar_text_bytes=500, compile=Limits(max_schema_depth=8))
    deep = {"type": "object"}
    for _ in range(10):
        deep = {"type": "object", "properties": {"a": deep}}
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(200)}}
    for fields, field, limit in [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": deep}}},
         "response_format.json_schema.schema", "max_schema_depth"),
        ({"structured_outputs": {"json": json.dumps(deep)}}, "structured_outputs.json", "max_schema_depth"),
        ({"structured_outputs": {"json": huge}}, "structured_outputs.json", "max_schema_bytes"),
        ({"structured_outputs": {"json": " " * 3000 + "{}"}}, "structured_outputs.json", "max_schema_bytes"),
        ({"structured_outputs": {"regex": "a" * 600}}, "structured_outputs.regex", "max_grammar_text_bytes"),
        ({"structured_outputs": {"choice": ["word"] * 200}}, "structured_outputs.choice", None),  # one copy: fits
        ({"structured_outputs": {"choice": [f"w{i}" for i in range(200)]}}, "structured_outputs.choice",
         "max_grammar_text_bytes"),
        ({"structured_outputs": {"grammar": "start: A\n" + "//\n" * 200}}, "structured_outputs.grammar",
         "max_grammar_text_bytes"),
    ]:
        if limit is None:
            assert constraint_of_fields(**fields, limits=tight).field == field
            continue
        with pytest.raises(AdmissionError) as info:
            constraint_of_fields(**fields, limits=tight)
        assert field in str(info.value) and limit in str(info.value), str(info.value)
    with pytest.raises(AdmissionError, match="cad_json_schema.*max_schema_bytes"):  # the key sent directly, too
        admit({"cad_json_schema": json.dumps(huge)}, limits=tight)  # (its nesting: the middleware's, below)
    python_stops = '{"a":' * 5000 + "1" + "}" * 5000  # deeper than Python's parser reads: refused all the same
    with pytest.raises(AdmissionError, match="structured_outputs.json.*max_schema_depth"):
        constraint_of_fields(structured_outputs={"json": python_stops}, limits=ServerLimits(compile=Limits(max_schema_depth=8)))


def test_a_chat_body_is_rewritten_into_vllm_xargs():
    body = {"model": "m", "messages": [], "response_format": {"type": "json_schema", "json_schema": {
        "name": "pet", "schema": SCHEMA}}, "vllm_xargs": {"cad_tag": "t", "other": 1}}
    fields = rewrite_body(body)
    assert fields.field == "response_format.json_schema.schema"
    assert "response_format" not in body and "structured_outputs" not in body  # vLLM never sees them
    assert body["vllm_xargs"] == {"cad_tag": "t", "other": 1, "cad_json_schema": fields.spec.schema}
    assert ConstraintRequest.from_extra_args(body["vllm_xargs"]).grammar == fields.spec
    legacy = {"model": "m", "prompt": "x", "guided_choice": ["a", "b"], "guided_decoding_backend": "xgrammar"}
    assert rewrite_body(legacy).field == "guided_choice"  # vLLM 0.32 would ignore it: unconstrained output
    assert legacy == {"model": "m", "prompt": "x", "vllm_xargs": {"cad_grammar_text": choice_grammar(["a", "b"])}}
    plain = {"model": "m", "prompt": "x", "response_format": {"type": "text"}}
    assert rewrite_body(plain) is None and plain["response_format"] == {"type": "text"}
    for xargs in ({"cad_grammar": "json"}, "cad_grammar=json"):
        with pytest.raises(RequestError, match="one constraint|vllm_xargs must be an object"):
            rewrite_body({"structured_outputs": {"regex": "a"}, "vllm_xargs": xargs})


def _spec_accepts():
    """accepts(spec, text): the whole text is a sentence of the spec's grammar (GPT-2's vocabulary,
    compiled as the server's library compiles it)."""
    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    library = GrammarLibrary(vocab, cache=False)

    def accepts(spec, text):
        ids = encode(vocab, text.encode())
        m = Matcher(library.get(spec))
        return m.validate(ids) == len(ids) and (m.advance_many(ids) or True) and m.is_accepting()

    return accepts


def test_whitespace_options_set_the_json_schema_front_ends_whitespace():
    """disable_any_whitespace: compact JSON, as vLLM's xgrammar and guidance backends write it; whitespace_pattern
    (and the removed guided_whitespace_pattern): the regex at each place JSON allows whitespace, as Outlines reads
    it. The option travels in cad_whitespace, is part of the cache key, and changes nothing for a regex."""
    default = constraint_of_fields(structured_outputs={"json": SCHEMA}).spec
    compact = constraint_of_fields(structured_outputs={"json": SCHEMA, "disable_any_whitespace": True}).spec
    pattern = constraint_of_fields(structured_outputs={"json": SCHEMA, "whitespace_pattern": "[ ]{0,2}"}).spec
    legacy = constraint_of_fields(guided={"json": SCHEMA, "whitespace_pattern": "[ ]{0,2}"}).spec
    assert (default.whitespace, compact.whitespace, pattern.whitespace) == (None, "compact", "(?:[ ]{0,2})")
    assert legacy == pattern and len({default.key, compact.key, pattern.key}) == 3
    assert constraint_of_fields(structured_outputs={"json_object": True, "disable_any_whitespace": True}
                                ).spec.whitespace == "compact"
    assert constraint_of_fields(structured_outputs={"json": SCHEMA, "whitespace_pattern": "compact"}
                                ).spec.whitespace == "(?:compact)"  # a regex, never a mode's name
    assert constraint_of_fields(structured_outputs={"regex": "a", "disable_any_whitespace": True}).spec == \
        constraint_of_fields(structured_outputs={"regex": "a"}).spec
    for spec in (compact, pattern):
        request = ConstraintRequest(grammar=spec)
        assert request.to_extra_args()["cad_whitespace"] == spec.whitespace
        assert ConstraintRequest.from_extra_args(request.to_extra_args()) == request
    with pytest.raises(RequestError, match="cad_whitespace belongs to cad_json_schema"):
        ConstraintRequest.from_extra_args({"cad_grammar": "json", "cad_whitespace": "compact"})
    with pytest.raises(RequestError, match="cad_whitespace must be a string"):
        ConstraintRequest.from_extra_args({"cad_json_schema": "{}", "cad_whitespace": 1})
    accepts = _spec_accepts()
    for text, want in [('{"name": "x", "kind": "cat"}', (True, False, True)),
                       ('{"name":"x","kind":"cat"}', (True, True, True)),
                       ('{"name":  "x", "kind":"cat"}', (False, False, True)),
                       ('{"name":   "x","kind":"cat"}', (False, False, False)),
                       ('{"name":\n"x","kind":"cat"}', (False, False, False))]:
        assert tuple(accepts(s, text) for s in (default, compact, pattern)) == want, text


def test_cad_property_order_reaches_the_json_schema_front_end():
    """vllm_xargs cad_property_order "any": the schema's keys in any order; part of the cache key; refused
    beside a Lark grammar, or with a value that is not an order."""
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                         "required": ["a"]})
    any_order = ConstraintRequest.from_extra_args({"cad_json_schema": schema, "cad_property_order": "any"})
    declared = ConstraintRequest.from_extra_args({"cad_json_schema": schema})
    assert any_order.grammar.property_order == "any" and any_order.grammar.key != declared.grammar.key
    assert ConstraintRequest.from_extra_args(any_order.to_extra_args()) == any_order
    for bad, words in [({"cad_grammar": "json", "cad_property_order": "any"}, "belongs to cad_json_schema"),
                       ({"cad_json_schema": schema, "cad_property_order": "sorted"}, "must be one of"),
                       ({"cad_json_schema": schema, "cad_property_order": 1}, "must be a string")]:
        with pytest.raises(RequestError, match=words):
            ConstraintRequest.from_extra_args(bad)
    accepts = _spec_accepts()
    assert accepts(any_order.grammar, '{"b": "x", "a": 1}') and not accepts(declared.grammar, '{"b": "x", "a": 1}')
    assert not accepts(any_order.grammar, '{"b": "x"}')  # a is required, in any order
    check_grammar(any_order.grammar)  # the gate's check takes the option too


def test_sampling_params_structured_outputs_move_into_extra_args():
    params = SimpleNamespace(structured_outputs=SimpleNamespace(
        json=None, regex="[0-9]+", choice=None, grammar=None, json_object=None, structural_tag=None,
        disable_any_whitespace=False, disable_additional_properties=False, whitespace_pattern=None),
        extra_args={"cad_tag": "x"})
    fields = take_structured_outputs(params)
    assert params.structured_outputs is None  # vLLM's backend has nothing to run
    assert params.extra_args == {"cad_tag": "x", "cad_grammar_text": fields.spec.text}
    assert take_structured_outputs(params) is None  # a second look finds nothing to move
    clash = SimpleNamespace(structured_outputs={"regex": "a"}, extra_args={"cad_grammar": "json"})
    with pytest.raises(RequestError, match="one constraint"):
        take_structured_outputs(clash)


def test_a_json_schema_compiles_in_the_gates_worker_and_the_engine_only_loads_it(small_data, tmp_path):
    from cad_outlines import Matcher
    from cad_outlines.decoding.encoding import TokenEncoder
    from cad_outlines.serving import GrammarGate
    from cad_outlines.serving.tokenizer import shared_vocabulary

    tok_dir = small_data / "models/stories260K_hf"
    gate = GrammarGate(tok_dir, 512, cache=tmp_path)
    spec = constraint_of_fields(structured_outputs={"json": SCHEMA}).spec
    gate.ensure(spec)
    assert gate.compiled == [spec.key]
    tokenizer, vocab = shared_vocabulary(tok_dir, 512)
    library = GrammarLibrary(vocab, cache=tmp_path)
    assert library.on_disk(spec)  # its index lists the files compile_json_schema wrote, all there
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("schema-"))  # one index file
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # the worker's build folder is gone
    (tmp_path / ".schema-build-4242-x").mkdir()  # what a worker killed mid-build (pid 4242) leaves
    remove_schema_builds(tmp_path, 4242)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
    m = Matcher(library.get(spec))
    m.advance_many(TokenEncoder(tokenizer, vocab).encode('{"name":"Tom","kind":"cat"}'))
    assert m.allowed_mask()[vocab.eos_token_ids[0]]
    again = GrammarGate(tok_dir, 512, cache=tmp_path)
    again.ensure(spec)
    assert again.compiled == []  # found on disk: no worker
    compact = constraint_of_fields(structured_outputs={"json": SCHEMA, "disable_any_whitespace": True}).spec
    again.ensure(compact)  # the same schema, other whitespace: another grammar, compiled in the worker with it
    assert again.compiled == [compact.key]
    enc = TokenEncoder(tokenizer, vocab)
    tight, spaced = enc.encode('{"name":"Tom","kind":"cat"}'), enc.encode('{"name": "Tom","kind":"cat"}')
    assert Matcher(library.get(compact)).validate(tight) == len(tight)
    assert Matcher(library.get(compact)).validate(spaced) < len(spaced)  # no space after the colon
    assert Matcher(library.get(spec)).validate(spaced) == len(spaced)
    with pytest.raises(RequestError, match="JSON Schema does not compile"):  # the worker's refusal
        gate.ensure(GrammarSpec(schema='{"type": "string", "pattern": "(a)\\\\1"}'))
    with pytest.raises(RequestError, match="JSON Schema does not compile"):  # the same check in process
        check_grammar(GrammarSpec(schema='{"type": "string", "pattern": "(a)\\\\1"}'))


def test_the_middleware_rewrites_chat_bodies_and_names_the_field_it_refuses(small_data, tmp_path, monkeypatch):
    from cad_outlines.serving.http.middleware import GrammarAdmissionMiddleware
    from cad_outlines.serving.limits import set_server_limits

    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path))
    set_server_limits(ServerLimits(compile=Limits(max_schema_depth=8)))
    config = SimpleNamespace(tokenizer=str(small_data / "models/stories260K_hf"), get_vocab_size=lambda: 512)
    app_state = SimpleNamespace(state=SimpleNamespace(vllm_config=SimpleNamespace(model_config=config)))
    seen = []

    async def app(scope, receive, send):
        body = (await receive())["body"]
        length = dict(scope["headers"]).get(b"content-length")
        seen.append((scope["path"], json.loads(body), length == str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = GrammarAdmissionMiddleware(app)

    async def call(path, payload, spelt=lambda text: text):
        body = spelt(json.dumps(payload)).encode()
        chunks = [{"type": "http.request", "body": body, "more_body": False}]
        sent = []

        async def receive():
            return chunks.pop(0) if chunks else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": path, "app": app_state,
                 "headers": [(b"content-length", str(len(body)).encode())]}
        await middleware(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()

    deep = {"type": "object"}
    for _ in range(10):
        deep = {"type": "object", "properties": {"a": deep}}
    try:
        ok = asyncio.run(call("/v1/chat/completions", {"messages": [], "structured_outputs": {"choice": ["y", "n"]}}))
        refused = [asyncio.run(call("/v1/chat/completions", {"messages": [], "response_format": {
                       "type": "json_schema", "json_schema": {"name": "d", "schema": deep}}})),
                   asyncio.run(call("/v1/completions", {"prompt": "x", "structured_outputs": {"grammar": "nope"}})),
                   asyncio.run(call("/v1/completions", {"prompt": "x", "structured_outputs": {"json": {
                       "type": "string", "pattern": "(a)\\1"}}})),
                   asyncio.run(call("/v1/completions", {"prompt": "x", "vllm_xargs": {"cad_json_schema": json.dumps(
                       deep)}}))]
        escaped = asyncio.run(call("/v1/completions", {"prompt": "x", "structured_outputs": {"choice": ["y", "n"]}},
                                   lambda text: text.replace("structured_outputs", "structured\\u005foutputs")))
        legacy = asyncio.run(call("/v1/completions", {"prompt": "x", "guided_choice": ["y", "n"]}))
        other = asyncio.run(call("/v1/responses", {"input": "x", "structured_outputs": {"regex": "a"}}))
    finally:
        set_server_limits(None)
    assert ok[0] == 200
    path, body, length_ok = seen[0]
    assert "structured_outputs" not in body and length_ok
    assert re.search("CHOICE", body["vllm_xargs"]["cad_grammar_text"])
    for (status, answer), words in zip(refused, [("response_format.json_schema.schema", "max_schema_depth"),
                                                 ("structured_outputs.grammar", "does not compile"),
                                                 ("structured_outputs.json", "JSON Schema does not compile"),
                                                 ("cad_json_schema", "max_schema_depth")]):
        assert status == 400 and all(w in answer for w in words), answer
    assert escaped[0] == 200 and seen[1][1]["vllm_xargs"] == body["vllm_xargs"]  # a key spelt with \u escapes
    assert legacy[0] == 200 and seen[2][1] == {"prompt": "x", "vllm_xargs": body["vllm_xargs"]}  # vLLM's removed field
    assert other[0] == 200 and seen[-1][1]["structured_outputs"] == {"regex": "a"}  # not a route we rewrite
    assert len(seen) == 4
