"""The server's limits without vLLM: request arguments at admission, the middleware's body
handling (any path, size cap, JSON only), compile workers under OS limits, the refusal memory,
the cache folder's cap and the loaded-grammar LRU. The same against a real server:
tests/serving/test_serving_attacks.py."""

import asyncio
import json
import os
import time

import numpy as np
import pytest

from cad_outlines.errors import ResourceLimitError, SettingError
from cad_outlines.limits import Limits
from cad_outlines.serving import GrammarSpec, RequestError
from cad_outlines.serving.constraints.admission import AdmissionError, admit
from cad_outlines.serving.constraints.compile_worker import CompileRefused
from cad_outlines.serving.constraints.constraint_state import SequenceConstraint, batch_masks, unpack_rows
from cad_outlines.serving.constraints.grammar_gate import GrammarGate, evict_cache
from cad_outlines.serving.constraints.grammar_library import GrammarLibrary, check_grammar
from cad_outlines.serving.http.middleware import GrammarAdmissionMiddleware, cad_arguments_of_body
from cad_outlines.serving.limits import ServerLimits
from cad_outlines.serving.constraints.request import ConstraintRequest

TIGHT = ServerLimits(max_ids=8, max_grammar_text_bytes=100, max_string_chars=10, max_n_lines=50,
                     max_stop_at_forced=4, max_body_bytes=1000)
COPY = {"cad_grammar": "copy_edit", "cad_n_lines": 3}


def test_limits_come_from_the_environment_and_bad_values_are_named():
    assert ServerLimits.from_env({}) == ServerLimits()
    got = ServerLimits.from_env({"CAD_OUTLINES_MAX_IDS": "100", "CAD_OUTLINES_COMPILE_TIMEOUT_S": "2.5"})
    assert got.max_ids == 100 and got.compile_timeout_s == 2.5
    for bad in ("ten", "0", "-3", "inf", "nan", "none", "2.5"):
        with pytest.raises(SettingError, match="CAD_OUTLINES_MAX_IDS"):
            ServerLimits.from_env({"CAD_OUTLINES_MAX_IDS": bad})


@pytest.mark.parametrize("args, key", [
    ({"cad_script_ids": list(range(9))}, "cad_script_ids"),
    ({"cad_script_ids": [100]}, "cad_script_ids"),  # outside the vocabulary of 100
    ({**COPY, "cad_program_ids": list(range(9))}, "cad_program_ids"),
    ({**COPY, "cad_program_ids": [3, 100]}, "cad_program_ids"),
    ({"cad_grammar": "copy_edit", "cad_n_lines": 51}, "cad_n_lines"),
    ({"cad_grammar": "copy_edit", "cad_n_lines": float("inf")}, "cad_n_lines"),
    ({"cad_grammar": "copy_edit", "cad_n_lines": float("nan")}, "cad_n_lines"),
    ({**COPY, "cad_stop_at_forced": 5}, "cad_stop_at_forced"),
    ({**COPY, "cad_monotonic": 2}, "cad_monotonic"),
    ({**COPY, "cad_session": "s" * 11}, "cad_session"),
    ({"cad_grammar": "json", "cad_tag": "t" * 11}, "cad_tag"),
    ({"cad_grammar": "jsonjsonjson"}, "cad_grammar"),
    ({"cad_grammar": "json", "cad_start": "s" * 11}, "cad_start"),
    ({"cad_grammar_text": "start: A\n" + "//\n" * 40}, "cad_grammar_text"),
    ({"cad_grammar_text": "é" * 60}, "cad_grammar_text"),  # 120 UTF-8 bytes
    ({"cad_script_ids": [True]}, "cad_script_ids"),
    ({"cad_x" + str(i): 1 for i in range(1000)}, "cad_x"),
])
def test_admission_refuses_each_argument_over_a_limit_naming_its_key(args, key):
    with pytest.raises(RequestError) as info:
        admit(args, vocab_size=100, limits=TIGHT)
    assert key in str(info.value) and len(str(info.value)) < 600


def test_admission_passes_what_is_within_the_limits_and_says_how_to_raise_one():
    req = admit({**COPY, "cad_program_ids": [1, 2, 99], "cad_session": "s1"}, vocab_size=100, limits=TIGHT)
    assert req.edit.program_ids == (1, 2, 99)
    with pytest.raises(AdmissionError) as info:
        admit({"cad_script_ids": list(range(9))}, limits=TIGHT)
    assert isinstance(info.value, ResourceLimitError) and info.value.limit == "max_ids"
    assert "CAD_OUTLINES_MAX_IDS" in str(info.value)


def test_cad_arguments_are_found_wherever_a_body_carries_them():
    def found(payload):
        return cad_arguments_of_body(payload if isinstance(payload, bytes) else json.dumps(payload).encode())

    assert found({"prompt": "no arguments here", "vllm_xargs": {"other": 1}}) == []
    assert found({"vllm_xargs": {"cad_grammar": "json", "x": 1}}) == [{"cad_grammar": "json"}]
    assert found({"sampling_params": {"extra_args": {"cad_script_ids": [1]}}}) == [{"cad_script_ids": [1]}]
    assert found({"vllm_xargs": json.dumps({"cad_grammar": "sql"})}) == [{"cad_grammar": "sql"}]  # a form field
    assert found(b'{"vllm_xargs": {"\\u0063ad_grammar": "json"}}') == [{"cad_grammar": "json"}]  # escaped key
    assert found(b"not json at all") == []
    with pytest.raises(RequestError, match="JSON"):
        found(b"prompt=1&cad_grammar=json")
    with pytest.raises(RequestError, match="JSON"):
        found(b"prompt=1&cad%5Fgrammar=json")
    with pytest.raises(RequestError, match="twice"):
        found(b'{"vllm_xargs": {"cad_script_ids": [1], "cad_script_ids": [99999]}}')
    deep = b"[" * 100000 + b"]" * 100000  # too deep for the parser: not JSON, and no cad_ in it
    assert found(deep) == []


def _call(middleware, path, chunks, headers=()):
    sent = []

    async def main():
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def receive():
            return queue.pop(0) if queue else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await middleware({"type": "http", "method": "POST", "path": path, "headers": list(headers),
                          "app": APP}, receive, send)

    asyncio.run(main())
    return sent


APP = None


def test_the_middleware_caps_bodies_and_gates_any_path(small_data):
    from types import SimpleNamespace

    global APP
    config = SimpleNamespace(tokenizer=str(small_data / "models/stories260K_hf"), get_vocab_size=lambda: 512)
    APP = SimpleNamespace(state=SimpleNamespace(vllm_config=SimpleNamespace(model_config=config)))
    seen = []

    async def app(scope, receive, send):
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = GrammarAdmissionMiddleware(app, limits=TIGHT)
    sent = _call(middleware, "/anything", [b"x" * 600, b"x" * 600])  # streamed, no length given
    assert sent[0]["status"] == 413 and b"max_body_bytes" in sent[1]["body"] and not seen
    sent = _call(middleware, "/tokenize", [b"{}"], headers=[(b"content-length", b"5000")])  # declared
    assert sent[0]["status"] == 413 and not seen
    for ids, word in ((list(range(20)), b"max_ids"), ([511, 512], b"vocabulary")):
        body = json.dumps({"vllm_xargs": {"cad_script_ids": ids}}).encode()
        sent = _call(middleware, "/some/new/route", [body[:7], body[7:]])
        assert sent[0]["status"] == 400 and b"cad_script_ids" in sent[1]["body"] and word in sent[1]["body"]
        assert not seen
    plain = json.dumps({"prompt": "hello", "max_tokens": 3}).encode()
    sent = _call(middleware, "/v1/completions", [plain[:5], plain[5:]])
    assert sent[0]["status"] == 200 and seen == [plain]  # passed on unchanged


def test_a_relative_import_is_refused_without_looking_for_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = 'start: A\n%import .secret (A)\n'
    with pytest.raises(RequestError) as absent:
        check_grammar(GrammarSpec(text=text))
    (tmp_path / "secret.lark").write_text('A: "TOP-SECRET"\n')
    with pytest.raises(RequestError) as present:
        check_grammar(GrammarSpec(text=text + "// another text\n"))
    assert "relative %import" in str(absent.value) and str(absent.value) == str(present.value)
    check_grammar(GrammarSpec(text='start: NUMBER\n%import common.NUMBER\n'))  # lark's standard library is fine


def test_a_script_id_outside_the_logits_ends_that_request_instead_of_indexing_past_the_row():
    state = SequenceConstraint(ConstraintRequest(script_ids=(10**9,)), None, [], eos_ids=(3,))
    rows = unpack_rows(batch_masks([state], 64), 64)
    assert state.error and "outside the logits" in state.error
    assert np.flatnonzero(rows[0]).tolist() == [3]


def test_the_cache_folder_is_capped_least_recently_used_first(tmp_path):
    now = time.time()
    for i, (name, age) in enumerate([("flat-a.bin", 500), ("lazy-b.bin", 400), ("flat-c.bin.tmp123-4", 200),
                                     ("lazy-d.bin", 300), ("flat-e.bin", 1)]):
        p = tmp_path / name
        p.write_bytes(b"x" * 100)
        os.utime(p, (now - age, now - age))
    gone = evict_cache(tmp_path, 250)
    assert [p.name for p in gone] == ["flat-c.bin.tmp123-4", "flat-a.bin", "lazy-b.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flat-e.bin", "lazy-d.bin"]
    assert [p.name for p in evict_cache(tmp_path, 150)] == ["lazy-d.bin"]
    assert evict_cache(tmp_path, 50) == []  # flat-e.bin was written a second ago: a request is about to load it
    assert [p.name for p in evict_cache(tmp_path, 50, keep_newer_s=0)] == ["flat-e.bin"]


def test_loaded_grammars_are_evicted_least_recently_used_first(small_data, tmp_path):
    from cad_outlines.serving.tokenizer import shared_vocabulary

    _, vocab = shared_vocabulary(small_data / "models/stories260K_hf", 512)
    library = GrammarLibrary(vocab, cache=tmp_path, max_loaded=2)
    specs = [GrammarSpec(text=f'start: "g{i}"\n') for i in range(3)]
    library.get(specs[0])
    library.get(specs[1])
    library.get(specs[0])  # used again: specs[1] is now the oldest
    library.get(specs[2])
    assert len(library) == 2 and library.loaded(specs[1]) is None and library.loaded(specs[0]) is not None


def test_a_compile_past_its_limits_is_killed_refused_and_remembered(small_data, tmp_path):
    # the library's own limits would refuse these first: here the OS limits are tested (the worker gets them)
    unbounded = Limits(max_dfa_states=None, max_compile_seconds=None, max_lexer_configs=None)
    limits = ServerLimits(compile_timeout_s=3, compile_cpu_s=10, max_pending_compiles=1, compile=unbounded)
    gate = GrammarGate(small_data / "models/stories260K_hf", 512, cache=tmp_path, limits=limits)
    slow = GrammarSpec(text="start: T\nT: /[^y]{32000}/\n")
    t0 = time.perf_counter()
    first = gate.future(slow)
    with pytest.raises(ResourceLimitError, match="max_pending_compiles"):  # one compile at a time allowed here
        gate.ensure(GrammarSpec(text='start: "other"\n'))
    with pytest.raises(CompileRefused, match="compile_timeout_s") as info:
        first.result()
    assert info.value.limit == "compile_timeout_s" and time.perf_counter() - t0 < 60
    t0 = time.perf_counter()
    with pytest.raises(CompileRefused, match="compile_timeout_s"):  # remembered: no second worker
        gate.ensure(slow)
    assert time.perf_counter() - t0 < 0.5 and gate.compiled == []
    # the imports fit in 250 MiB, the DFA does not
    small = ServerLimits(compile_memory_bytes=250 * 2**20, compile_timeout_s=30, compile=unbounded)
    gate = GrammarGate(small_data / "models/stories260K_hf", 512, cache=tmp_path, limits=small)
    with pytest.raises(CompileRefused, match="compile_memory_bytes") as info:
        gate.ensure(GrammarSpec(text="start: X\nX: /(a|b)*a(a|b){14}/\n"))
    assert info.value.limit == "compile_memory_bytes"


def test_the_gate_looks_again_for_a_grammar_the_cache_evicted(small_data, tmp_path):
    gate = GrammarGate(small_data / "models/stories260K_hf", 512, cache=tmp_path)
    spec = GrammarSpec(text='start: "kept" | "evicted"\n')
    gate.ensure(spec)
    gate.ensure(spec)  # in the cache: a file lookup
    assert gate.compiled == [spec.key]
    for p in tmp_path.iterdir():
        p.unlink()
    gate.ensure(spec)  # the engine would not find it: compiled again, not waved through
    assert gate.compiled == [spec.key, spec.key] and any(tmp_path.iterdir())


# --- issue 29: grammars that would loop, grammars without terminals, matchers stopped at decode time ----

LOOPING = '!start: (a+)*\n!a.1: "A" |\n'  # lark's test_resolve_ambiguity_with_shared_node


def test_the_gate_refuses_a_grammar_whose_parser_would_loop_and_passes_one_without_terminals():
    with pytest.raises(RequestError, match="reduce forever without reading input") as info:
        check_grammar(GrammarSpec(text=LOOPING))
    assert "rule a" in str(info.value)
    check_grammar(GrammarSpec(text="start: \n"))
    check_grammar(GrammarSpec(text="start: start?\n"))


def test_a_matcher_stopped_by_a_decode_time_limit_ends_its_own_request_alone(small_data, monkeypatch):
    import cad_outlines.engine.compile as compile_module
    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.vocabulary import Vocabulary

    vocab = Vocabulary.from_tokenizer(small_data / "tokenizers" / "gpt2")
    monkeypatch.setattr(compile_module, "check_parser_loops", lambda *a: None)  # as if the check missed it
    looping = compile_grammar(LOOPING, vocab, cache=False, lazy=True, progress=False,
                              limits=Limits(max_reductions_per_token=50_000))
    good = compile_grammar('start: "x"+\n', vocab, cache=False, lazy=True, progress=False)
    x, eos = vocab.token_bytes.index(b"x"), vocab.eos_token_ids[0]
    states = [SequenceConstraint(ConstraintRequest(grammar=GrammarSpec(text=t)), g, out)
              for t, g, out in [('start: "x"+\n', good, []), (LOOPING, looping, []), ('start: "x"+\n', good, [])]]
    for step in range(2):
        rows = unpack_rows(batch_masks(states, vocab.size), vocab.size)
        assert states[1].error and "max_reductions_per_token" in states[1].error
        assert np.flatnonzero(rows[1]).tolist() == [eos]  # it ends
        assert states[0].error is None and states[2].error is None and rows[0][x] and rows[2][x]
        states[0].output_ids.append(x)
        states[2].output_ids.append(x)
    assert rows[0][eos] and rows[0][x]  # after "x", the others go on as before
