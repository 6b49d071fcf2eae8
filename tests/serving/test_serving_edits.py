"""One engine request per Copy-as-Decode edit (vLLM's streaming-input sessions) and the
``POST /v1/cad/edits`` route, on a real vLLM engine (CPU build) with the tiny random
Qwen2-shaped model of tests/serving/test_serving.py: in-process by ``AsyncLLM``, and over HTTP
against ``python -m cad_outlines.serving`` on 127.0.0.1.

Skipped when vLLM is not importable (install it with ``pip install -e ".[vllm]"``)."""

import asyncio
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.fixture_data import VLLM_SKIP_REASON

vllm = pytest.importorskip("vllm", reason=VLLM_SKIP_REASON)

from cad_outlines import oracle_program, resolve  # noqa: E402
from cad_outlines.edits.program import Copy, parse_program  # noqa: E402
from cad_outlines.serving import ServedEditor  # noqa: E402
from tests.serving_helpers import (SERVER_ARGS, async_engine, blocking_llm, free_port, kill_server,  # noqa: E402
                                   make_tiny_model, start_server)

pytestmark = pytest.mark.slow

DOC = "".join(f"def f{i}(x):\n    y = x * {i}\n    return y + {i}\n\n\n" for i in range(8))
NEW = DOC.replace("    y = x * 3\n", "    y = x * 3 + 1\n")


@pytest.fixture(scope="module")
def tiny_model(data_dir, tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny_qwen2"), data_dir / "tokenizers" / "gpt2")


# -- in-process AsyncLLM ------------------------------------------------------------------------
@pytest.fixture(scope="class")
def engine(tiny_model, tmp_path_factory):
    """(AsyncLLM, its event loop): every test runs on this one loop."""
    with async_engine(tiny_model, tmp_path_factory.mktemp("grammar_cache_async_edits")) as got:
        yield got


class TestOneRequestPerEdit:
    def test_vllm_keeps_every_sampled_token_but_the_last_and_appends_the_next_chunk(self, engine):
        """What the one-request path relies on (vLLM 0.32 streaming input): after a turn the
        request holds its prompt and every token it sampled but the last, and the next chunk
        is appended to exactly that. Read back from the prefix cache: a fresh request finds
        the session's full blocks only if its prompt is the session's sequence."""
        from vllm import SamplingParams
        from vllm.engine.protocol import StreamingInput
        from vllm.inputs.engine import tokens_input
        from vllm.sampling_params import RequestOutputKind

        llm, loop = engine
        first, second = list(range(1000, 1040)), list(range(2000, 2030))  # 40 + 3 kept + 30: two full 32-blocks
        params = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True, output_kind=RequestOutputKind.DELTA)
                  for n in (4, 1)]

        async def session() -> list[int]:
            gate: asyncio.Queue = asyncio.Queue()

            async def inputs():
                yield StreamingInput(tokens_input(first), params[0])
                await gate.get()
                yield StreamingInput(tokens_input(second), params[1])

            sampled = []
            async for out in llm.generate(inputs(), params[0], "session-check"):
                sampled += out.outputs[0].token_ids
                if out.outputs[0].finish_reason is not None and len(sampled) == 4:
                    gate.put_nowait(True)  # turn 1 is over: send the next chunk
            return sampled

        async def cached(prompt: list[int], rid: str) -> int:
            async for out in llm.generate({"prompt_token_ids": prompt}, SamplingParams(max_tokens=1), rid):
                last = out
            return last.num_cached_tokens

        sampled = loop.run_until_complete(session())
        assert len(sampled) == 5
        kept_last = loop.run_until_complete(cached(first + sampled[:4] + second, "as-if-kept"))
        dropped_last = loop.run_until_complete(cached(first + sampled[:3] + second, "as-if-dropped"))
        assert (kept_last, dropped_last) == (32, 64)

    def test_an_edit_is_one_request_computing_only_what_it_appends(self, engine):
        """A teacher-forced edit: the same program and text on both paths; on the one-request
        path the engine gets only the prompt and what each turn appends (copied lines, forced
        runs), so it computes no more than prompt + program + copied tokens (+ one EOS per
        turn), and less than with a request per op."""
        from vllm import SamplingParams

        from cad_outlines.serving.editing.edit_run import arun_edits

        llm, loop = engine
        one = ServedEditor.from_async_llm(llm)
        per_op = ServedEditor.from_async_llm(llm, one_request=False)
        script = oracle_program(DOC, NEW).to_text()

        edit = one.new_edit(DOC, "Fix f3. (A)", script=script)

        async def main():
            await one.aedit(DOC, "warm the shared prefix", script=script)  # both runs then find the same blocks cached
            a = (await arun_edits(one.backend, [edit]))[0]
            b = await per_op.aedit(DOC, "Fix f3. (B)", script=script)
            # the request held exactly the client's context: a fresh request with it finds every full block cached
            async for out in llm.generate({"prompt_token_ids": edit.engine_context}, SamplingParams(max_tokens=1),
                                          "read-back"):
                read_back = out
            return a, b, read_back.num_cached_tokens

        a, b, read_back = loop.run_until_complete(main())
        assert read_back == (len(edit.engine_context) - 1) // 32 * 32 > a.stats.cached_tokens
        for r in (a, b):
            assert r.complete and r.text == NEW and r.text == resolve(parse_program(r.program_text), DOC)
        assert a.program_text == b.program_text
        sa, sb = a.stats, b.stats
        assert (sa.engine_path, sb.engine_path) == ("one_request", "request_per_op")
        copies = sum(isinstance(op, Copy) for op in a.program.ops)
        assert copies >= 2 and sa.requests >= copies + 1  # turns of the one request
        # sent: the prompt, the copied lines and the forced runs (not one that ends the program: nothing follows it)
        assert sa.prompt_tokens_sent == len(edit.engine_context) - sa.generated_tokens
        assert sa.prompt_tokens_sent <= sa.prompt_tokens + sa.copied_tokens + sa.fast_forwarded_tokens
        assert 0 < sa.cached_tokens < sb.cached_tokens  # the shared prefix, once: later turns resume in place
        # computed: what the request holds, once, less the prefix-cache hits, and one EOS step per turn
        assert sa.computed_tokens == len(edit.engine_context) - sa.cached_tokens + sa.requests
        program = sa.generated_tokens + sa.fast_forwarded_tokens
        assert sa.computed_tokens <= 1.1 * (sa.prompt_tokens + program + sa.copied_tokens)
        assert sa.computed_tokens < sb.computed_tokens
        print(f"tokens computed: one request {sa.computed_tokens} ({sa.requests} turns), request per op "
              f"{sb.computed_tokens} ({sb.requests} requests, {sb.prompt_tokens_sent} prompt tokens sent)")

    def test_edits_in_other_formats_give_the_edit_with_search_text_appended(self, engine):
        """Teacher-forced oracle programs in the diff formats on the real engine: the server applies the
        format's grammar and the document constraint, the client appends forced runs (search text once
        unique); the text is the edit, the program the in-process loop's."""
        from cad_outlines.edits.formats import oracle_text

        llm, loop = engine
        editor = ServedEditor.from_async_llm(llm)

        async def main(fmt, script):
            return await editor.aedit(DOC, "Fix f3.", script=script, format=fmt)

        for fmt in ("search_replace", "udiff", "apply_patch", "str_replace"):
            script = oracle_text(DOC, NEW, fmt)
            r = loop.run_until_complete(main(fmt, script))
            assert r.complete and r.text == NEW and r.program_text == script and r.format == fmt, (fmt, r.error)
            assert r.stats.fast_forwarded_tokens > 0 and r.stats.engine_path == "one_request"

    def test_copies_skipped_make_the_edit_one_turn_of_prompt_and_program(self, engine):
        """copy_mode="skip" on vLLM: the processor does not stop at a copy (cad_stop_at_copy=0)
        and no line is appended, so the edit is one turn; the engine held the prompt and the
        program only, and the text is the prefill run's."""
        from cad_outlines.serving.editing.edit_run import arun_edits

        llm, loop = engine
        one = ServedEditor.from_async_llm(llm)
        script = oracle_program(DOC, NEW).to_text()
        edit = one.new_edit(DOC, "Fix f3. (skip)", script=script, forced_min_run=0, copy_mode="skip")
        (r,) = loop.run_until_complete(arun_edits(one.backend, [edit]))
        assert r.complete and r.text == NEW and sum(isinstance(op, Copy) for op in r.program.ops) >= 2
        s = r.stats
        assert (s.engine_path, s.requests, s.copied_tokens) == ("one_request", 1, 0)
        assert edit.engine_context == edit.prompt_ids + edit.program_ids
        assert s.computed_tokens == len(edit.engine_context) - s.cached_tokens + 1  # one turn: one EOS step


# -- the edit route over HTTP -------------------------------------------------------------------
BODY_LIMIT = 200_000


@pytest.fixture(scope="class")
def edit_server(tiny_model, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("edit_server") / "server.log"
    env = {**os.environ, "CAD_OUTLINES_CACHE": str(tmp_path_factory.mktemp("grammar_cache_edits")),
           "CAD_OUTLINES_MAX_EDIT_BODY_BYTES": str(BODY_LIMIT)}
    cmd = [sys.executable, "-m", "cad_outlines.serving", "--model", str(tiny_model),
           "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS]
    proc, url = start_server(cmd, env, log, "the server")
    yield proc, url, port, log
    kill_server(proc)


def post_edit(url: str, body: bytes | dict, timeout: float = 300) -> tuple[int, list[dict]]:
    """(status, NDJSON lines or the error body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}/v1/cad/edits", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            assert resp.headers["content-type"].startswith("application/x-ndjson")
            return resp.status, [json.loads(line) for line in resp if line.strip()]
    except urllib.error.HTTPError as e:
        return e.code, [json.loads(e.read())]


def running(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:num_requests_running"))


class TestEditEndpoint:
    def test_an_edit_in_another_format_applies_and_an_unknown_format_is_a_400(self, edit_server):
        """format=udiff: sampled under the udiff grammar and the document constraint on the server, the
        hunks stream as they close and the program applies; a teacher-forced one gives the edit."""
        from cad_outlines.edits.formats import get_format

        _, url, _, _ = edit_server
        status, lines = post_edit(url, {"document": DOC, "instruction": "Fix f3.", "max_tokens": 60,
                                        "temperature": 1.0, "seed": 7, "format": "udiff"})
        assert status == 200 and lines[-1]["event"] == "end" and all(x["event"] != "error" for x in lines), lines
        end = lines[-1]
        assert end["format"] == "udiff" and end["stop_reason"] in ("end", "max_new_tokens")
        if end["complete"]:
            assert get_format("udiff").apply(end["program"], DOC) == end["text"]
        assert all(x["event"] in ("hunk", "end") for x in lines)
        status, lines = post_edit(url, {"document": DOC, "instruction": "x", "format": "diff"})
        assert status == 400 and "unknown format 'diff'" in lines[0]["error"]["message"]

    def test_an_edit_streams_its_ops_and_ends_with_the_resolved_text(self, edit_server):
        _, url, _, _ = edit_server
        status, lines = post_edit(url, {"document": DOC, "instruction": "Fix f3.", "max_tokens": 60,
                                        "temperature": 1.0, "top_p": 1.0, "seed": 42, "model": "tiny"})
        assert status == 200 and lines[-1]["event"] == "end" and all(x["event"] != "error" for x in lines)
        assert sum(x["event"] == "copy" for x in lines) >= 2  # a seed that copies: the edit took several turns
        assert lines[-1]["stats"]["requests"] >= 3
        end = lines[-1]
        assert end["text"] == resolve(parse_program(end["program"], partial=True), DOC, partial=True)
        streamed = "".join(x["text"] for x in lines[:-1] if x["event"] in ("copy", "gen_text"))
        # the ops came as they resolved (a gen cut by max_tokens streamed text the partial result leaves out)
        assert streamed == end["text"] if end["complete"] else streamed.startswith(end["text"])
        for x in lines:
            if x["event"] == "copy":
                i, j = x["lines"]
                assert x["text"] == "".join(DOC.splitlines(keepends=True)[i - 1:j])
        stats = end["stats"]
        assert stats["engine_path"] == "one_request" and end["stop_reason"] in ("end", "max_new_tokens")
        program = stats["generated_tokens"] + stats["fast_forwarded_tokens"]
        assert stats["computed_tokens"] <= 1.1 * (stats["prompt_tokens"] + program + stats["copied_tokens"])
        assert end["diff"].startswith("--- before") or end["text"] == DOC

    def test_bad_requests_get_one_clear_line_and_the_server_goes_on(self, edit_server):
        _, url, _, _ = edit_server
        cases = [
            (b'{"instruction": "x"}', 400, "document is missing"),
            ('{"document": "\xff", "instruction": "x"}'.encode("latin-1"), 400, "not UTF-8"),
            (b'{"document": "a\\n", "instruction": "x", "stop": ["y"]}', 400, "unknown field(s) ['stop']"),
            (b'{"document": "a\\n", "instruction": "x", "temperature": "hot"}', 400, "temperature must be a number"),
            (b'{"document": "a\\n", "instruction": "x", "temperature": 50}', 400, "temperature must be in"),
            (b'{"document": "a\\n", "instruction": "x", "max_tokens": 0}', 400, "max_tokens must be in"),
            (b'{"document": "a\\n", "instruction": "x", "model": "other"}', 404, "not served here"),
            (b"not json", 400, "not JSON"),
            (json.dumps({"document": "word " * 3000, "instruction": "x"}).encode(), 400, "too long"),
            (json.dumps({"document": "a" * (BODY_LIMIT + 1), "instruction": "x"}).encode(), 413, "limit"),
        ]
        for body, status, words in cases:
            got, lines = post_edit(url, body)
            message = lines[0]["error"]["message"]
            assert got == status and words in message and "\n" not in message, (body[:60], got, message)
        status, lines = post_edit(url, {"document": DOC, "instruction": "Fix f3.", "max_tokens": 8})
        assert status == 200 and lines[-1]["event"] == "end"

    def test_a_client_leaving_mid_edit_aborts_its_request(self, edit_server):
        """The client hangs up as soon as the edit's stream has begun (its response headers): the
        edit's requests are aborted at once (an edit of 1,500 sampled tokens would keep the engine
        busy for many seconds; the server logs that the client left), and the server serves the
        next edit.

        The client leaves on the headers, not after some events: which sampled programs run long
        depends on the machine (CPU kernels round differently, so a seed at temperature 1 samples
        other tokens elsewhere), and a short program can end between the events the client read
        and its hang-up (CI saw that for six seeds in a row). The headers go out just before the
        edit's generator starts, so the edit is at most a forward or two in when the client
        leaves; a few seeds guard the rest of that race."""
        _, url, port, log = edit_server
        left = "cad_outlines edit left before its end"
        for seed in (14, 3, 21, 8, 30, 5):
            before = log.read_text().count(left)
            body = json.dumps({"document": DOC, "instruction": "Fix f3.", "max_tokens": 1500, "temperature": 1.0,
                               "seed": seed}).encode()
            sock = socket.create_connection(("127.0.0.1", port), timeout=120)
            sock.sendall(b"POST /v1/cad/edits HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
            got = b""
            while b"\r\n\r\n" not in got:  # the response headers: the edit's stream has begun
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection before its headers"
                got += chunk
            assert got.startswith(b"HTTP/1.1 200"), got[:200]
            sock.close()  # the client leaves
            seen = time.perf_counter()
            while log.read_text().count(left) == before and time.perf_counter() - seen < 10:
                time.sleep(0.1)
            if log.read_text().count(left) > before:
                break  # left mid-stream
        else:
            pytest.fail("the server never logged an edit left mid-stream: six clients hung up on its headers")
        gone = time.perf_counter()
        while running(url) > 0:
            assert time.perf_counter() - gone < 10, "the edit's request kept running after the client left"
            time.sleep(0.1)
        status, lines = post_edit(url, {"document": DOC, "instruction": "Fix f3.", "max_tokens": 8})
        assert status == 200 and lines[-1]["event"] == "end"


# -- in-process LLM (blocking) ------------------------------------------------------------------
@pytest.fixture(scope="class")
def llm(tiny_model, tmp_path_factory):
    with blocking_llm(tiny_model, tmp_path_factory.mktemp("grammar_cache_llm_edits")) as got:
        yield got


class TestOneRequestOnLLM:
    def test_edits_run_as_one_request_each_on_the_blocking_engine(self, llm):
        """The blocking ``LLM`` makes the same resumable requests: concurrent edits, each one
        request, the same programs as with a request per op."""
        script = oracle_program(DOC, NEW).to_text()
        ServedEditor.from_llm(llm).edit(DOC, "warm the shared prefix", script=script)  # the same cache hits for all
        one = ServedEditor.from_llm(llm).edit_many([(DOC, "Fix f3. (C)"), (DOC, "Fix f3. (D)")], script=script)
        per_op = ServedEditor.from_llm(llm, one_request=False).edit(DOC, "Fix f3. (E)", script=script)
        for r in one:
            s = r.stats
            assert r.complete and r.text == NEW and r.program_text == per_op.program_text
            assert s.engine_path == "one_request" and s.requests > 2
            assert s.prompt_tokens_sent <= s.prompt_tokens + s.copied_tokens + s.fast_forwarded_tokens
            assert s.computed_tokens < per_op.stats.computed_tokens
        assert per_op.stats.engine_path == "request_per_op"
