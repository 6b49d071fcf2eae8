"""Our processor and Copy-as-Decode on a real vLLM engine (CPU build): a tiny random
Qwen2-shaped model with the GPT-2 tokenizer, served on 127.0.0.1, in-process by ``LLM``
and by ``AsyncLLM``. One engine at a time: each class starts its own and stops it.

Skipped when vLLM is not importable (install it with ``pip install -e ".[vllm]"``)."""

import asyncio
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.fixture_data import VLLM_SKIP_REASON

vllm = pytest.importorskip("vllm", reason=VLLM_SKIP_REASON)

from cad_outlines import oracle_program, resolve, split_lines  # noqa: E402
from cad_outlines.edits.program import Copy  # noqa: E402
from cad_outlines.serving import MIDDLEWARE, PROCESSOR, ServedEditor, ServingError  # noqa: E402
from tests.serving_helpers import (SERVER_ARGS, async_engine, blocking_llm, free_port, kill_server,  # noqa: E402,F401
                                   make_tiny_model, post, start_server)

pytestmark = pytest.mark.slow

BEFORE = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef neg(a):\n    return -a\n"
AFTER = BEFORE.replace("a - b", "a + b")
SCRIPT = oracle_program(BEFORE, AFTER).to_text()
PET = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8}, "kind": {"enum": ["cat", "dog", "bird"]}, "happy": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["small", "old"]}, "maxItems": 2}},
    "required": ["name", "kind", "happy", "tags"], "additionalProperties": False}  # closed: short outputs
@pytest.fixture(scope="module")
def tiny_model(data_dir, tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny_qwen2"), data_dir / "tokenizers" / "gpt2")


# -- checking Python output with lark ------------------------------------------------------------
@pytest.fixture(scope="module")
def python_checks(tiny_model, tmp_path_factory):
    """(lark check, token-sequence check) for text generated under the shipped `python` grammar.

    The oracle of the main suite (analysis/references/legality_checker.py) needs lark >= 1.3 and this venv has vLLM's
    lark 1.2.2, so two checks stand in for it. lark itself (python.lark + PythonIndenter,
    LALR, independent of our engine) parses a finished text whole; for a text cut by
    max_tokens it lexes what it can and feeds every lexeme but the last one (which may be
    unfinished: a name, a string, a newline whose indentation is still growing) to its
    interactive LALR parser, which must accept them. Our reference matcher (the
    pure-Python implementation, not the native core that made the masks) then accepts the
    whole token sequence, the unfinished last lexeme included, and EOS exactly where the
    output ended with one."""
    import lark
    from lark.indenter import DedentError, PythonIndenter

    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.engine.reference.matcher import ReferenceMatcher
    from cad_outlines.grammars import load_grammar_text
    from cad_outlines.serving.tokenizer import shared_vocabulary

    parser = lark.Lark(load_grammar_text("python"), parser="lalr", lexer="basic", start="file_input",
                       postlex=PythonIndenter())
    _, vocab = shared_vocabulary(str(tiny_model), None)
    grammar = compile_grammar("python", vocab, cache=tmp_path_factory.mktemp("python_eager"), progress=False)

    def lark_check(text: str, finished: bool) -> int:
        """Lexemes lark checked (-1: the whole text parsed)."""
        if finished:
            parser.parse(text)
            return -1
        tokens = []
        try:
            for tok in parser.lex(text):
                tokens.append(tok)
        except lark.exceptions.UnexpectedCharacters:
            pass  # the unfinished last lexeme (e.g. an open string)
        except DedentError:  # only legal for the last lexeme: a newline whose indentation is still growing
            end = max((t.end_pos for t in tokens if t.end_pos is not None), default=0)
            assert text[end:].strip(" \t\r\n\f") == "", f"lark: a dedent error before the end of {text!r}"
        positions = [t.start_pos for t in tokens if t.start_pos is not None]
        last = max(positions, default=0)
        done = [t for t in tokens if t.start_pos is not None and t.start_pos < last]
        ip = parser.parse_interactive(start="file_input")
        for tok in done:
            ip.feed_token(tok)  # raises lark.exceptions.UnexpectedToken if lark refuses
        return len(done)

    def tokens_check(ids: list[int], ended_with_eos: bool) -> None:
        m = ReferenceMatcher(grammar)
        body = ids[:-1] if ended_with_eos else ids
        m.advance_many(body)  # raises InvalidTokenError naming the refused token
        assert not ended_with_eos or m.allowed_mask()[ids[-1]]

    return lark_check, tokens_check


def check_python_output(python_checks, text: str, ids: list[int], finish: str, eos: int) -> None:
    lark_check, tokens_check = python_checks
    assert finish in ("stop", "length"), finish
    ended = finish == "stop"
    assert not ended or ids[-1] == eos
    tokens_check(ids, ended)
    lark_check(text, ended)


# -- the HTTP server --------------------------------------------------------------------------
def complete(url, body, timeout=300):
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps({"model": "tiny", **body}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def stream_complete(url, body, on_tokens, timeout=300):
    """A streamed completion; `on_tokens(ids)` per chunk. Returns (text, ids, finish)."""
    payload = {"model": "tiny", **body, "stream": True, "return_token_ids": True}
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    text, ids, finish = [], [], None
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            for choice in json.loads(line[5:])["choices"]:
                got = choice.get("token_ids") or []
                if got:
                    on_tokens(got)
                text.append(choice.get("text") or "")
                ids += got
                finish = choice.get("finish_reason") or finish
    return "".join(text), ids, finish


class Background:
    """Plain requests sent one after another (or run by `one()`) until stopped, with the
    arrival time of every token: shows whether the engine kept serving meanwhile."""

    def __init__(self, one):
        self.one, self.times, self.stopped = one, [], threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stopped.is_set():
            self.one(lambda ids: self.times.extend([time.perf_counter()] * len(ids)))

    def __enter__(self):
        self.thread.start()
        while not self.times:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.thread.join(120)


def assert_served_meanwhile(times: list[float], sent: float, first: float) -> None:
    """While the new grammar compiled (from its request's submission to its first token),
    the other requests kept getting tokens (at `times`): the engine was not stopped. A
    stopped engine leaves them waiting the whole compile; the bound is a quarter of it (at
    least 1 s), so a loaded machine's slower steps do not read as a stop."""
    marks = [sent, *(t for t in times if sent < t < first), first]
    wait = max(b - a for a, b in zip(marks, marks[1:]))
    compiling = first - sent
    print(f"grammar ready after {compiling:.2f} s; longest wait of the other requests {wait:.2f} s")
    assert compiling > 1.0, "the grammar was ready too fast for the check to mean anything"
    assert wait < max(1.0, compiling / 4), (f"the other requests got no token for {wait:.2f} s while the grammar "
                                            f"compiled ({compiling:.2f} s)")


@pytest.fixture(scope="class")
def server(tiny_model, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, "CAD_OUTLINES_CACHE": str(tmp_path_factory.mktemp("grammar_cache"))}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
           "--logits-processors", PROCESSOR, "--middleware", MIDDLEWARE, "--enable-prompt-tokens-details",
           *SERVER_ARGS]
    proc, url = start_server(cmd, env, log)
    yield proc, url, log
    kill_server(proc)

@pytest.fixture(scope="class")
def http_editor(server, tiny_model):
    _, url, _ = server
    return ServedEditor.from_server(url, "tiny", tiny_model)


class TestHTTPServer:
    def test_python_as_text_compiles_off_the_engine_and_lark_accepts_the_text(self, server, python_checks,
                                                                              tiny_model):
        """The shipped python grammar sent as text no cache has seen: the middleware holds these requests
        while a worker compiles it (whole, as every grammar sent as text: seconds, where the shipped name's
        lazy compile is too quick to show anything), and the plain requests streaming meanwhile keep
        getting tokens."""
        from cad_outlines.grammars import load_grammar_text

        _, url, log = server
        text = load_grammar_text("python") + f"\n// a text no cache has seen: {time.time_ns()}\n"
        plain = {"prompt": [5, 6, 7], "max_tokens": 48, "temperature": 1.0, "ignore_eos": True}
        results, firsts = {}, {}

        def run(i):
            first = []
            results[i] = stream_complete(url, {"prompt": [100 + i, 200, 300], "max_tokens": 96, "temperature": 1.0,
                                               "seed": i, "vllm_xargs": {"cad_grammar_text": text}},
                                         lambda ids: first or first.append(time.perf_counter()))
            firsts[i] = first[0]

        with Background(lambda on: stream_complete(url, plain, on)) as background:
            sent = time.perf_counter()
            threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        assert len(results) == 3, log.read_text()[-3000:]
        assert_served_meanwhile(background.times, sent, min(firsts.values()))
        eos = json.loads((tiny_model / "config.json").read_text())["eos_token_id"]
        for text, ids, finish in results.values():
            check_python_output(python_checks, text, ids, finish, eos)
        assert "was not compiled before it reached the engine" not in log.read_text()

    def test_json_by_name_and_bad_grammars_fail_alone(self, server, tmp_path):
        _, url, _ = server
        status, body = complete(url, {"prompt": [1, 2, 3], "max_tokens": 40, "temperature": 1.0, "seed": 3,
                                      "vllm_xargs": {"cad_grammar": "json"}})
        assert status == 200
        text = body["choices"][0]["text"]
        assert text.lstrip()[:1] in '{["-0123456789tfn', text
        secret = tmp_path / "secret.txt"
        secret.write_text("TOP-SECRET line\n")
        for xargs, word in [({"cad_grammar_text": "start: FOO\n"}, "FOO"), ({"cad_grammar": "pyhton"}, "no shipped"),
                            ({"cad_grammar_text": 'start: "a" start\n'}, "does not compile"),  # empty language
                            ({"cad_grammar_text": str(secret)}, "grammar")]:
            status, body = complete(url, {"prompt": [1, 2, 3], "max_tokens": 8, "vllm_xargs": xargs})
            assert status == 400 and word in json.dumps(body), (xargs, body)
            assert "TOP-SECRET" not in json.dumps(body)
        assert complete(url, {"prompt": [1, 2, 3], "max_tokens": 4})[0] == 200  # the server goes on

    def test_the_fields_an_openai_client_sends_run_on_our_engine(self, server, tiny_model):
        """response_format and structured_outputs, no vllm_xargs, on the chat and completion routes: a
        random-weight model writes output that validates only because our masks make it; the grammars were
        compiled by our gate's worker (vLLM's own backend never saw the fields: the middleware took them out)."""
        import jsonschema
        import lark
        from transformers import PreTrainedTokenizerFast

        _, url, log = server
        tokenizer = PreTrainedTokenizerFast.from_pretrained(tiny_model)
        chat = {"model": "tiny", "messages": [{"role": "user", "content": "A pet, as JSON."}], "temperature": 1.0}
        prompt = {"model": "tiny", "prompt": "A pet, as JSON: ", "temperature": 1.0}

        def texts(path, body):
            status, answer = post(url, path, body, timeout=300)
            assert status == 200, answer
            choices = answer["choices"]
            assert all(c["finish_reason"] == "stop" for c in choices), choices
            return [c["message"]["content"] if "message" in c else c["text"] for c in choices]

        for text in texts("/v1/chat/completions", {**chat, "n": 3, "seed": 1, "max_tokens": 120, "response_format": {
                "type": "json_schema", "json_schema": {"name": "pet", "schema": PET, "strict": True}}}):
            jsonschema.validate(json.loads(text), PET)
        for text in texts("/v1/completions", {**prompt, "n": 2, "seed": 2, "max_tokens": 120,
                                              "structured_outputs": {"json": json.dumps(PET)}}):
            jsonschema.validate(json.loads(text), PET)
        for text in texts("/v1/completions", {**prompt, "n": 2, "seed": 2, "max_tokens": 120,  # compact JSON
                                              "structured_outputs": {"json": PET, "disable_any_whitespace": True}}):
            jsonschema.validate(json.loads(text), PET)
            assert not re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', "", text)), text  # none outside strings
        # any object: strings and objects end at a '"' or '}' the random model rarely picks; a bias makes them short
        quote_brace = {str(i): 10 for i in tokenizer.convert_tokens_to_ids(['"', "}"])}
        for text in texts("/v1/completions", {**prompt, "n": 2, "seed": 3, "max_tokens": 200, "logit_bias": quote_brace,
                                              "response_format": {"type": "json_object"}}):
            assert isinstance(json.loads(text), dict)
        for text in texts("/v1/chat/completions", {**chat, "n": 3, "seed": 4, "max_tokens": 20,
                                                   "structured_outputs": {"regex": "^[0-9]{3}-[a-z]{2}$"}}):
            assert re.fullmatch("[0-9]{3}-[a-z]{2}", text), text
        for text in texts("/v1/completions", {**prompt, "n": 3, "seed": 5, "max_tokens": 20,
                                              "structured_outputs": {"choice": ["yes", "no", "not sure"]}}):
            assert text in ("yes", "no", "not sure")
        for text in texts("/v1/completions", {**prompt, "n": 2, "seed": 7, "max_tokens": 20,  # removed from vLLM:
                                              "guided_choice": ["yes", "no", "not sure"]}):  # it would not constrain
            assert text in ("yes", "no", "not sure")
        sentence = 'start: "Lily" " " VERB " " ("a ball" | "the sun") "."\nVERB: "saw" | "had"\n'
        for text in texts("/v1/chat/completions", {**chat, "n": 2, "seed": 6, "max_tokens": 20,
                                                   "structured_outputs": {"grammar": sentence}}):
            lark.Lark(sentence, parser="lalr").parse(text)
        assert log.read_text().count("cad_outlines: compiling grammar (JSON Schema") == 3  # PET, compact, json_object
        # keys in any order (vllm_xargs: no request field says it); one required name of two, and '"' and '}'
        # biased, so that the object ends soon whatever the machine samples (a key may repeat in this mode)
        pair = {"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"type": "boolean"}},
                "required": ["a"], "additionalProperties": False}
        for text in texts("/v1/completions", {**prompt, "n": 2, "seed": 8, "max_tokens": 200, "logit_bias": quote_brace,
                                              "vllm_xargs": {"cad_json_schema": json.dumps(pair),
                                                             "cad_property_order": "any"}}):
            jsonschema.validate(json.loads(text), pair)
        for body, words in [  # refused, naming the field; never decoded unconstrained
            ({**chat, "structured_outputs": {"grammar": "root ::= [a-z]+"}}, ["structured_outputs.grammar"]),  # GBNF
            ({**chat, "response_format": {"type": "structural_tag", "format": {"type": "any_text"}}},
             ["structural_tag"]),
            ({**prompt, "structured_outputs": {"json": PET, "whitespace_pattern": "[ "}},
             ["structured_outputs.whitespace_pattern is not a valid regex"]),
            ({**prompt, "structured_outputs": {"regex": "a"}, "vllm_xargs": {"cad_grammar": "json"}}, ["not both"]),
            ({**prompt, "vllm_xargs": {"cad_json_schema": json.dumps(PET), "cad_property_order": "sorted"}},
             ["cad_property_order must be one of"]),
        ]:
            status, answer = post(url, "/v1/chat/completions" if "messages" in body else "/v1/completions", body)
            assert status == 400 and all(w in json.dumps(answer) for w in words), (body, answer)
        # a route the middleware does not rewrite: vLLM derives structured outputs there, and they are refused by
        # name at admission (validate_params), not handed to vLLM's own backend
        status, answer = post(url, "/v1/chat/completions/batch", {
            "model": "tiny", "messages": [[{"role": "user", "content": "hi"}]], "max_tokens": 8,
            "structured_outputs": {"regex": "[a-z]+"}})
        assert status == 400 and "structured_outputs.regex" in json.dumps(answer), answer

    def test_copy_as_decode_edit_over_http_resolves_with_prefix_cache_hits(self, http_editor):
        events = list(http_editor.stream(BEFORE, "Fix add.", script=SCRIPT))
        result = events[-1].result
        assert result.complete and result.text == AFTER, result.program_text
        copies = [e.op for e in events if isinstance(e.op, Copy)]
        assert len(copies) >= 2 and result.stats.requests >= len(copies) + 1
        assert result.stats.cached_tokens > 0 and result.stats.forced_runs > 0
        assert "".join(e.text for e in events) == AFTER

    def test_sampled_edits_run_concurrently_with_spans_in_range(self, http_editor):
        results = http_editor.edit_many([(BEFORE, "Fix add."), (BEFORE.replace("\n", "\r\n"), "Fix add.")],
                                        max_new_tokens=40, temperature=1.0, seed=5)
        for r in results:
            n = len(split_lines(r.document))
            assert all(1 <= op.start <= op.end <= n for op in r.program.ops if isinstance(op, Copy))
            assert resolve(r.program, r.document, partial=True) == r.text
            assert r.complete or r.stop_reason == "max_new_tokens"

    def test_a_server_dying_mid_edit_gives_a_clear_error_with_the_partial_program(self, server, http_editor):
        proc, _, _ = server
        with pytest.raises(ServingError) as info:
            for event in http_editor.stream(BEFORE, "Fix add.", script=SCRIPT):
                if isinstance(event.op, Copy) and proc.poll() is None:
                    kill_server(proc)  # the first copy closed: the server dies before the next request
        partial = info.value.partial
        assert partial is not None and not partial.complete
        assert list(partial.program.ops)[:1] == [Copy(1, 1)] and "partial program" in str(info.value)


# -- in-process LLM ---------------------------------------------------------------------------
@pytest.fixture(scope="class")
def llm(tiny_model, tmp_path_factory):
    with blocking_llm(tiny_model, tmp_path_factory.mktemp("grammar_cache_llm")) as got:
        yield got


class TestLLM:
    def test_edit_with_prefix_cache_hits_and_forced_runs_in_one_step(self, llm):
        """Forced runs appended to the next prompt (default) against decoded one per step:
        the same program and text, fewer engine steps, one request more per run."""
        editor = ServedEditor.from_llm(llm, one_request=False)  # a request per op (one request: test_serving_edits)
        merged = editor.edit(BEFORE, "Fix add.", script=SCRIPT)
        decoded = editor.edit(BEFORE, "Fix add.", script=SCRIPT, forced_min_run=0)
        for r in (merged, decoded):
            assert r.complete and r.text == AFTER and r.stats.cached_tokens > 0
        assert merged.program_text == decoded.program_text
        moved = merged.stats.fast_forwarded_tokens - decoded.stats.fast_forwarded_tokens
        assert moved > 0 and merged.stats.forced_runs > decoded.stats.forced_runs
        assert merged.stats.generated_tokens == decoded.stats.generated_tokens - moved
        assert merged.stats.steps < decoded.stats.steps
        assert merged.stats.requests > decoded.stats.requests


    def test_structured_outputs_run_on_our_processor_not_vllms_backend(self, llm):
        """SamplingParams.structured_outputs on an in-process LLM with our processor: validate_params moves
        it into extra_args before vLLM copies the parameters for its engine, so vLLM's own backend has
        nothing to run; the random-weight model's output validates only because our masks make it."""
        import jsonschema
        from vllm import SamplingParams
        from vllm.exceptions import VLLMValidationError
        from vllm.sampling_params import StructuredOutputsParams

        params = SamplingParams(max_tokens=120, temperature=1.0, seed=7, structured_outputs=StructuredOutputsParams(
            json=PET))
        outs = llm.generate([{"prompt_token_ids": [5, 6, 7]}, {"prompt_token_ids": [8, 9]}], params)  # one params
        assert params.structured_outputs is None and "cad_json_schema" in params.extra_args
        for out in outs:
            assert out.outputs[0].finish_reason == "stop"
            jsonschema.validate(json.loads(out.outputs[0].text), PET)
        choice = SamplingParams(max_tokens=8, temperature=1.0, seed=8,
                                structured_outputs=StructuredOutputsParams(choice=["left", "right"]))
        assert llm.generate([{"prompt_token_ids": [1]}], choice)[0].outputs[0].text in ("left", "right")
        with pytest.raises(VLLMValidationError, match="structured_outputs.whitespace_pattern"):  # a 400 over HTTP
            llm.generate([{"prompt_token_ids": [1]}], SamplingParams(max_tokens=4, structured_outputs=(
                StructuredOutputsParams(json=PET, whitespace_pattern="(", disable_any_whitespace=False))))


# -- in-process AsyncLLM -----------------------------------------------------------------------
@pytest.fixture(scope="class")
def engine(tiny_model, tmp_path_factory):
    """(AsyncLLM, its event loop): every test runs on this one loop."""
    with async_engine(tiny_model, tmp_path_factory.mktemp("grammar_cache_async")) as got:
        yield got


class TestAsyncLLM:
    def test_many_edits_run_concurrently_on_one_loop_and_stream(self, engine):
        llm, loop = engine
        editor = ServedEditor.from_async_llm(llm)
        order = []

        async def one(i, **kwargs):
            events = []
            async for event in editor.astream(BEFORE, "Fix add.", tag=f"e{i}", **kwargs):
                order.append((i, event.result is not None))
                events.append(event)
            return events

        async def main():
            forced = [one(i, script=SCRIPT) for i in range(3)]
            sampled = [editor.aedit(BEFORE, "Fix add.", max_new_tokens=30, temperature=1.0, seed=9)]
            return await asyncio.gather(*forced, *sampled)

        *scripted, sampled = loop.run_until_complete(main())
        for events in scripted:
            result = events[-1].result
            assert result.complete and result.text == AFTER and result.program_text.endswith("</program>")
            assert "".join(e.text for e in events) == AFTER  # streamed as the ops resolved
            s = result.stats  # one engine request per edit: only the prompt and what each turn appended was sent
            assert s.engine_path == "one_request" and s.forced_runs > 0
            assert s.prompt_tokens_sent <= s.prompt_tokens + s.copied_tokens + s.fast_forwarded_tokens
            assert s.prompt_tokens_sent >= s.prompt_tokens + s.copied_tokens
            assert result.stats.steps >= result.stats.generated_tokens
        first_end = next(k for k, (_, end) in enumerate(order) if end)
        assert {i for i, _ in order[:first_end]} == {0, 1, 2}  # all were under way before one ended
        assert resolve(sampled.program, BEFORE, partial=True) == sampled.text
        assert sampled.complete or sampled.stop_reason == "max_new_tokens"
        with pytest.raises(TypeError, match="aedit"):
            editor.edit(BEFORE, "Fix add.")

    def test_constrained_generation_waits_for_its_grammar_alone(self, engine, python_checks):
        """A grammar sent as text, never seen before: the request waits for a worker to
        compile it; the engine's other requests keep streaming meanwhile."""
        from vllm import SamplingParams

        from cad_outlines.grammars import load_grammar_text
        from cad_outlines.serving import RequestError

        llm, loop = engine
        backend = ServedEditor.from_async_llm(llm).backend
        text = load_grammar_text("python") + "\n// a text no cache has seen\n"
        times = []

        async def background(stop):
            i = 0
            while not stop.is_set():
                i += 1
                params = SamplingParams(max_tokens=32, temperature=1.0, ignore_eos=True)
                async for out in llm.generate({"prompt_token_ids": [5, 6, i % 50 + 7]}, params, f"bg-{i}"):
                    times.append(time.perf_counter())

        async def constrained(seed):
            first, out = None, None
            async for out in backend.generate([100, 200 + seed], grammar_text=text, max_tokens=64, temperature=1.0,
                                              seed=seed):
                first = first or time.perf_counter()
            return first, out

        async def main():
            stop = asyncio.Event()
            bg = asyncio.get_running_loop().create_task(background(stop))
            while not times:
                await asyncio.sleep(0.05)
            sent = time.perf_counter()
            try:
                outs = await asyncio.gather(constrained(1), constrained(2))
            finally:  # a refused compile must not leave the engine streaming for the next test
                stop.set()
                await bg
            with pytest.raises(RequestError, match="does not compile"):
                async for _ in backend.generate([1], grammar_text='start: "a" start\n', max_tokens=4):
                    pass
            return sent, outs

        sent, outs = loop.run_until_complete(main())
        assert_served_meanwhile(times, sent, min(f for f, _ in outs))
        assert len(backend.gate.compiled) == 1  # two requests, one compile
        eos = llm.model_config.hf_config.eos_token_id
        for _, out in outs:
            c = out.outputs[0]
            check_python_output(python_checks, c.text, list(c.token_ids), c.finish_reason, eos)

    def test_the_backend_takes_structured_outputs_through_the_gate(self, engine):
        llm, loop = engine
        backend = ServedEditor.from_async_llm(llm).backend

        async def main():
            outs = []
            for seed in (1, 2):
                async for out in backend.generate([5, 6], structured_outputs={"regex": "[a-c]{2}-[0-9]"},
                                                  max_tokens=10, temperature=1.0, seed=seed):
                    pass
                outs.append(out.outputs[0].text)
            return outs

        from cad_outlines.serving.constraints.request_fields import constraint_of_fields

        for text in loop.run_until_complete(main()):
            assert re.fullmatch("[a-c]{2}-[0-9]", text), text
        spec = constraint_of_fields(structured_outputs={"regex": "[a-c]{2}-[0-9]"}).spec
        assert backend.gate.compiled.count(spec.key) == 1  # by the gate's worker, before the requests were admitted

    def test_engine_dying_mid_edit_gives_a_clear_error_with_the_partial_program(self, engine):
        llm, loop = engine
        editor = ServedEditor.from_async_llm(llm)
        proc = llm.engine_core.resources.engine_manager.processes[0]

        async def main():
            async for event in editor.astream(BEFORE, "Fix add.", script=SCRIPT, forced_min_run=0):
                if isinstance(event.op, Copy) and proc.is_alive():
                    os.kill(proc.pid, signal.SIGKILL)  # the first copy closed: the engine dies

        with pytest.raises(ServingError) as info:
            loop.run_until_complete(main())
        partial = info.value.partial
        assert partial is not None and not partial.complete
        assert list(partial.program.ops)[:1] == [Copy(1, 1)] and "partial program" in str(info.value)
