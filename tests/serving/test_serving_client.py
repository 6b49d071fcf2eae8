"""The serving pieces that need no vLLM: request arguments, per-request constraint
state and batch masks, and the Copy-as-Decode client loop against a simulated engine
(the same state the vLLM processor keeps, a prefix cache in whole blocks)."""

import asyncio

import numpy as np
import pytest

from cad_outlines import oracle_program, resolve, split_lines
from cad_outlines.edits.program import Copy
from cad_outlines.engine.matcher import Matcher
from cad_outlines.serving import ConstraintRequest, GrammarSpec, RequestError
from cad_outlines.serving.editing.edit_run import Update, arun_edits, astream_edits, run_edits, stream_edits
from cad_outlines.serving.constraints.constraint_state import (
    SequenceConstraint, SessionStore, TokenTables, batch_masks, unpack_rows)
from cad_outlines.serving.constraints.grammar_library import GrammarLibrary, check_grammar
from cad_outlines.serving.editing.served_edit import SegmentOutcome, ServedEdit, ServingError, script_program_ids

DOC = "Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends."
AFTER = "Once upon a time there was a cat.\nThe cat liked fish.\nOne day the cat saw a dog.\nThey became friends."


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    from cad_outlines.engine.vocabulary import Vocabulary
    from cad_outlines.decoding.encoding import TokenEncoder

    model, tok = tiny
    vocab = Vocabulary.from_tokenizer(tok, model_vocab_size=model.config.vocab_size)
    library = GrammarLibrary(vocab, cache=tmp_path_factory.mktemp("cache"))
    grammar = library.get(GrammarSpec(name="copy_edit"))
    return library, grammar, TokenEncoder(tok, vocab), TokenTables.for_grammar(grammar)


def test_request_arguments_round_trip_and_bad_ones_are_named():
    req = ConstraintRequest.from_extra_args({"cad_grammar": "copy_edit", "cad_n_lines": 4, "cad_program_ids": [1, 2],
                                             "cad_session": "s", "other": 1})
    assert ConstraintRequest.from_extra_args(req.to_extra_args()) == req
    assert ConstraintRequest.from_extra_args({"temperature": 1}) is None
    for bad, word in [({"cad_grammar": "json", "cad_grammar_text": "x"}, "not both"),
                      ({"cad_grammr": "json"}, "cad_grammr"),
                      ({"cad_grammar": "json", "cad_n_lines": 3}, "copy_edit"),
                      ({"cad_grammar": "udiff", "cad_n_lines": 3, "cad_format": "diff"}, "unknown cad_format 'diff'"),
                      ({"cad_grammar": "copy_edit", "cad_n_lines": 3, "cad_format": "udiff", "cad_document": "x"},
                       "needs cad_grammar='udiff'"),
                      ({"cad_grammar": "udiff", "cad_n_lines": 3, "cad_format": "udiff"}, "needs cad_document"),
                      ({"cad_grammar": "copy_edit", "cad_n_lines": 3, "cad_document": "x"}, "cad_document belongs"),
                      ({"cad_grammar": "udiff", "cad_format": "udiff"}, "give cad_n_lines too"),
                      ({"cad_grammar": "copy_edit", "cad_n_lines": "3"}, "cad_n_lines"),
                      ({"cad_script_ids": [1, -2]}, "cad_script_ids")]:
        with pytest.raises(RequestError, match=word):
            ConstraintRequest.from_extra_args(bad)


def test_bad_grammars_are_refused_with_the_reason():
    with pytest.raises(RequestError, match="no shipped grammar 'pyhton'"):
        check_grammar(GrammarSpec(name="pyhton"))
    with pytest.raises(RequestError, match="FOO"):
        check_grammar(GrammarSpec(text="start: FOO\n"))
    check_grammar(GrammarSpec(name="python"))
    check_grammar(GrammarSpec(text='start: "a"+\n'))


def test_batch_masks_equal_each_matchers_own_and_spans_hold(setup):
    library, grammar, encoder, tables = setup
    json_g = library.get(GrammarSpec(name="json"))
    width = grammar.vocab_size + 7  # models pad their vocabulary
    ids = encoder.encode('{"a": [1, 2')
    plain = SequenceConstraint(ConstraintRequest(grammar=GrammarSpec(name="json")), json_g, list(ids))
    prog = encoder.encode('<copy lines="')
    edit = SequenceConstraint(ConstraintRequest.from_extra_args({"cad_grammar": "copy_edit", "cad_n_lines": 4}),
                              grammar, list(prog), tables=tables)
    rows = unpack_rows(batch_masks([plain, edit], width), width)
    m = Matcher(json_g)
    m.advance_many(ids)
    assert (rows[0][: json_g.vocab_size] == m.allowed_mask()).all() and not rows[0][json_g.vocab_size:].any()
    allowed = [grammar.token_bytes(t) for t in np.flatnonzero(rows[1])]
    assert allowed and all(b[:1] in b"1234" for b in allowed)  # a 4-line document: spans start at 1..4
    assert b"5" not in allowed and b"1" in allowed


def test_segment_stops_after_a_copy_and_resumes_from_the_session(setup):
    library, grammar, encoder, tables = setup
    sessions = SessionStore()
    ids = script_program_ids(grammar, encoder, '<copy lines="1-2"/><gen>x</gen></program>')
    k = next(i for i in range(len(ids)) if b"".join(grammar.token_bytes(t) for t in ids[: i + 1]).endswith(b'"/>'))
    args = {"cad_grammar": "copy_edit", "cad_n_lines": 4, "cad_session": "e1"}
    out: list[int] = []
    s = SequenceConstraint(ConstraintRequest.from_extra_args(args), grammar, out, tables=tables, sessions=sessions)
    for t in ids[: k + 1]:
        row = batch_masks([s], grammar.vocab_size)
        assert unpack_rows(row, grammar.vocab_size)[0][t]
        out.append(t)
    row = unpack_rows(batch_masks([s], grammar.vocab_size), grammar.vocab_size)[0]
    assert set(np.flatnonzero(row)) == set(grammar.eos_token_ids)  # the copy closed: EOS only
    s.ended()
    nxt = SequenceConstraint(ConstraintRequest.from_extra_args({**args, "cad_program_ids": ids[: k + 1]}), grammar,
                             [], tables=tables, sessions=sessions)
    assert nxt.resumed and nxt.error is None and sessions.hits == 1
    assert unpack_rows(batch_masks([nxt], grammar.vocab_size), grammar.vocab_size)[0][ids[k + 1]]


def test_a_request_that_goes_wrong_ends_alone(setup):
    library, grammar, encoder, tables = setup
    good = SequenceConstraint(ConstraintRequest(grammar=GrammarSpec(name="copy_edit")), grammar, [])
    bad = SequenceConstraint(ConstraintRequest(grammar=GrammarSpec(name="copy_edit"), script_ids=(7,)), grammar, [])
    rows = unpack_rows(batch_masks([good, bad], grammar.vocab_size), grammar.vocab_size)
    assert "script token 7" in bad.error and set(np.flatnonzero(rows[1])) == set(grammar.eos_token_ids)
    assert good.error is None and rows[0].sum() > 1


class SimulatedEngine:
    """Runs segments the way the vLLM processor constrains them: greedy over a fixed
    pseudo-random score per token, masks from SequenceConstraint, a prefix cache in
    blocks of 16 tokens; `die_after` requests, it fails. `steps` counts sampled tokens
    (one engine forward each); `channel()` serves the async loop."""

    def __init__(self, grammar, tables, encoder, die_after=None, block=16, library=None):
        self.grammar, self.tables, self.block, self.die_after = grammar, tables, block, die_after
        self.library = library  # given: each request's grammar comes from it (edits in other formats)
        self.encoder = encoder
        self.sessions = SessionStore()
        self.scores = np.random.default_rng(0).random(grammar.vocab_size)
        self.cached: set[tuple[int, ...]] = set()
        self.pending: list[Update] = []
        self.requests = self.steps = 0

    def submit(self, rid, seg):
        self.requests += 1
        if self.die_after is not None and self.requests > self.die_after:
            self.pending.append(Update(rid, [], True, error="ConnectionResetError: the server went away"))
            return
        hit = 0
        for n in range(self.block, len(seg.prompt_ids) + 1, self.block):
            if tuple(seg.prompt_ids[:n]) in self.cached:
                hit = n
        for n in range(self.block, len(seg.prompt_ids) + 1, self.block):
            self.cached.add(tuple(seg.prompt_ids[:n]))
        out: list[int] = []
        request = ConstraintRequest.from_extra_args(seg.extra_args)
        grammar = self.library.get(request.grammar) if self.library is not None else self.grammar
        state = SequenceConstraint(request, grammar, out, tables=self.tables, sessions=self.sessions,
                                   encode=self.encoder.encode)
        finish = "length"
        while len(out) < seg.max_tokens:
            row = unpack_rows(batch_masks([state], self.grammar.vocab_size), self.grammar.vocab_size)[0]
            tok = int(np.argmax(np.where(row, self.scores, -1)))
            out.append(tok)
            self.steps += 1
            if tok in seg.stop_token_ids:
                finish = "stop"
                break
        state.sync()
        state.ended()
        half = len(out) // 2  # streamed in two pieces
        self.pending += [Update(rid, out[:half]), Update(rid, out[half:], True, SegmentOutcome(finish, hit))]

    def poll(self):
        out, self.pending = self.pending, []
        return out

    def channel(self):
        return SimulatedChannel(self)


class SimulatedChannel:
    """The async loop's side of a SimulatedEngine: each get() yields to the event loop."""

    def __init__(self, engine):
        self.engine, self.queue, self.closed = engine, [], False

    def submit(self, rid, seg):
        before = len(self.engine.pending)
        self.engine.submit(rid, seg)
        self.queue += self.engine.pending[before:]
        del self.engine.pending[before:]

    async def get(self):
        await asyncio.sleep(0)
        return self.queue.pop(0)

    async def close(self):
        self.queue.clear()
        self.closed = True


def test_teacher_forced_edit_resolves_with_cache_hits(setup):
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    engine = SimulatedEngine(grammar, tables, encoder)
    edit = ServedEdit(grammar, encoder, DOC, "fish", script=script, forced_min_run=0)  # one request per copy
    events = list(stream_edits(engine, [edit]))
    result = events[-1][1].result
    assert result.complete and result.text == AFTER and result.stop_reason == "end"
    copies = [e.op for _, e in events if isinstance(e.op, Copy)]
    assert copies == [op for op in result.program.ops if isinstance(op, Copy)]
    assert result.stats.requests == len(copies) + 1 and result.stats.cached_tokens > 0
    assert engine.sessions.hits == len(copies)  # every later segment resumed its state
    assert {e.kind for _, e in events} == {"copy", "gen_text", "gen", "end"}  # as CopyEditor.stream says
    assert "".join(e.text for _, e in events) == AFTER  # streamed text is the new document


def test_skip_mode_runs_the_edit_in_one_request_without_the_copied_lines(setup):
    """copy_mode="skip": a copy does not end the request and its lines never enter the
    context, so with forced runs decoded the whole edit is one request of prompt + program
    tokens; the program and the new text are those of the prefill run."""
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    runs = {}
    for mode in ("prefill", "skip"):
        engine = SimulatedEngine(grammar, tables, encoder)
        edit = ServedEdit(grammar, encoder, DOC, "fish", script=script, forced_min_run=0, copy_mode=mode)
        runs[mode] = (run_edits(engine, [edit])[0], engine, edit)
    (prefill, _, _), (skip, e_skip, edit) = runs["prefill"], runs["skip"]
    copies = sum(isinstance(op, Copy) for op in skip.program.ops)
    assert copies >= 2 and skip.complete and skip.text == AFTER and skip.program_text == prefill.program_text
    assert (skip.stats.requests, e_skip.requests) == (1, 1) and prefill.stats.requests == copies + 1
    assert skip.stats.copied_tokens == 0 < prefill.stats.copied_tokens
    assert edit.context == edit.prompt_ids + edit.program_ids  # no copied line was sent
    assert skip.stats.prompt_tokens_sent == skip.stats.prompt_tokens
    assert e_skip.steps == skip.stats.steps == skip.stats.generated_tokens + 1  # the program, then one EOS
    with pytest.raises(ValueError, match="copy_mode must be 'prefill' or 'skip', not 'copy'"):
        ServedEdit(grammar, encoder, DOC, "fish", script=script, copy_mode="copy")


def test_forced_runs_go_into_the_next_prompt_in_one_step(setup):
    """With forced_min_run=k the engine ends a request where the grammar forces k or more
    tokens and the client appends them to the next prompt: fewer engine steps (one EOS
    instead of k decode steps), the same program and text."""
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    runs = {}
    for k in (0, 2, 1):
        engine = SimulatedEngine(grammar, tables, encoder)
        result = run_edits(engine, [ServedEdit(grammar, encoder, DOC, "", script=script, forced_min_run=k)])[0]
        runs[k] = (result, engine)
    (plain, e0), (merged, e2), (every, e1) = runs[0], runs[2], runs[1]
    for r in (plain, merged, every):
        assert r.complete and r.text == AFTER and r.program_text == plain.program_text
    assert plain.program_text.startswith("<program>") and plain.program_text.endswith("</program>")  # as README says
    assert merged.stats.forced_runs > plain.stats.forced_runs and every.stats.forced_runs >= merged.stats.forced_runs
    # every forced token came in a prompt, none was decoded; each run cost one EOS step instead
    moved = merged.stats.fast_forwarded_tokens - plain.stats.fast_forwarded_tokens
    assert moved > 0 and merged.stats.generated_tokens == plain.stats.generated_tokens - moved
    assert e2.steps == merged.stats.steps < e0.steps == plain.stats.steps
    assert merged.stats.requests > plain.stats.requests and merged.stats.forwards["fast_forward"] > 0
    assert e1.steps <= e2.steps and e0.sessions.hits == plain.stats.requests - 1


@pytest.mark.parametrize("doc", [DOC.replace("\n", "\r\n"), DOC + "\n", "only line"])
def test_sampled_edits_run_concurrently_with_valid_spans(setup, doc):
    library, grammar, encoder, tables = setup
    edits = [ServedEdit(grammar, encoder, doc, "x", max_new_tokens=30 + 10 * i) for i in range(3)]
    results = run_edits(SimulatedEngine(grammar, tables, encoder), edits)
    n = len(split_lines(doc))
    for r in results:
        for op in r.program.ops:
            if isinstance(op, Copy):
                assert 1 <= op.start <= op.end <= n
        assert resolve(r.program, doc, partial=True) == r.text
        assert r.complete or r.stop_reason == "max_new_tokens"


def test_round_trip_of_crlf_and_no_final_newline(setup):
    library, grammar, encoder, tables = setup
    for doc in (DOC.replace("\n", "\r\n"), DOC.rstrip("\n")):
        after = doc.replace("milk", "fish")
        r = run_edits(SimulatedEngine(grammar, tables, encoder),
                      [ServedEdit(grammar, encoder, doc, "", script=oracle_program(doc, after).to_text())])[0]
        assert r.text == after


def test_a_server_dying_mid_edit_gives_the_partial_program(setup):
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    with pytest.raises(ServingError, match="went away") as info:
        run_edits(SimulatedEngine(grammar, tables, encoder, die_after=1),
                  [ServedEdit(grammar, encoder, DOC, "", script=script, forced_min_run=0)])
    partial = info.value.partial
    assert not partial.complete and list(partial.program.ops) == [Copy(1, 1)]
    assert partial.text == split_lines(DOC)[0]


def test_async_loop_runs_edits_concurrently_and_streams(setup):
    library, grammar, encoder, tables = setup
    engine = SimulatedEngine(grammar, tables, encoder)
    script = oracle_program(DOC, AFTER).to_text()
    order = []

    async def one(i):
        edit = ServedEdit(grammar, encoder, DOC, "", script=script, tag=f"e{i}")
        events = []
        async for e, event in astream_edits(engine, [edit]):
            order.append((i, event.result is not None))
            events.append(event)
        return events

    async def main():
        return await asyncio.gather(*(one(i) for i in range(3)))

    for events in asyncio.run(main()):
        result = events[-1].result
        assert result.complete and result.text == AFTER and "".join(e.text for e in events) == AFTER
    first_end = next(k for k, (_, end) in enumerate(order) if end)
    assert {i for i, _ in order[:first_end]} == {0, 1, 2}  # all three were under way before one ended
    results = asyncio.run(arun_edits(engine, [ServedEdit(grammar, encoder, d, "", script=oracle_program(d, a).to_text())
                                              for d, a in [(DOC, AFTER), (AFTER, DOC)]]))
    assert [r.text for r in results] == [AFTER, DOC]


def test_leaving_an_async_edit_early_closes_its_channel(setup):
    library, grammar, encoder, tables = setup
    engine = SimulatedEngine(grammar, tables, encoder)
    channels = []
    engine.channel = lambda: channels.append(SimulatedChannel(engine)) or channels[-1]

    async def main():
        edit = ServedEdit(grammar, encoder, DOC, "", script=oracle_program(DOC, AFTER).to_text())
        stream = astream_edits(engine, [edit])
        async for _ in stream:
            break
        await stream.aclose()

    asyncio.run(main())
    assert len(channels) == 1 and channels[0].closed


def test_a_grammar_text_is_never_read_as_a_file_or_a_name(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET: do not echo\n")
    with pytest.raises(RequestError) as info:
        check_grammar(GrammarSpec(text=str(secret)))
    assert "TOP-SECRET" not in str(info.value)
    with pytest.raises(RequestError):
        check_grammar(GrammarSpec(text="json"))  # the text "json", not the shipped grammar
    check_grammar(GrammarSpec(text='start: "a"'))  # one line, no newline: still grammar text


def test_the_gate_compiles_in_a_worker_once_and_refuses_what_does_not_compile(small_data, tmp_path):
    from cad_outlines.serving import GrammarGate
    from cad_outlines.serving.tokenizer import shared_vocabulary

    tok_dir = small_data / "models/stories260K_hf"
    gate = GrammarGate(tok_dir, 512, cache=tmp_path)
    spec = GrammarSpec(text='start: "yes" | "no" | "maybe"\n')
    assert gate.future(spec) is gate.future(spec)  # one compile for concurrent requests
    gate.ensure(spec)
    gate.ensure(spec)
    assert gate.compiled == [spec.key]
    _, vocab = shared_vocabulary(tok_dir, 512)
    assert GrammarLibrary(vocab, cache=tmp_path).on_disk(spec)  # an engine would only load it
    with pytest.raises(RequestError, match="no shipped grammar"):
        gate.ensure(GrammarSpec(name="pyhton"))
    with pytest.raises(RequestError, match="does not compile"):  # loads in lark, empty language: the worker says so
        gate.ensure(GrammarSpec(text='start: "a" start\n'))


def test_the_http_middleware_holds_a_request_until_its_grammar_is_compiled(small_data, tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    from cad_outlines.serving.http.middleware import GrammarAdmissionMiddleware
    from cad_outlines.serving.tokenizer import shared_vocabulary

    monkeypatch.setenv("CAD_OUTLINES_CACHE", str(tmp_path))
    config = SimpleNamespace(tokenizer=str(small_data / "models/stories260K_hf"), get_vocab_size=lambda: 512)
    app_state = SimpleNamespace(state=SimpleNamespace(vllm_config=SimpleNamespace(model_config=config)))
    seen = []

    async def app(scope, receive, send):
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    middleware = GrammarAdmissionMiddleware(app)

    async def call(path, payload):
        body = json.dumps(payload).encode()
        chunks = [{"type": "http.request", "body": body[:10], "more_body": True},
                  {"type": "http.request", "body": body[10:], "more_body": False}]
        sent = []

        async def receive():
            return chunks.pop(0) if chunks else {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await middleware({"type": "http", "method": "POST", "path": path, "app": app_state}, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]), body

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        t = asyncio.get_running_loop().create_task(ticker())
        grammar = 'start: "held" | "until" | "compiled"\n'
        status, out, body = await call("/v1/completions", {"prompt": [1], "vllm_xargs": {"cad_grammar_text": grammar}})
        held_ticks = ticks
        bad = await call("/v1/completions", {"prompt": [1], "vllm_xargs": {"cad_grammar_text": 'start: "a" start\n'}})
        plain = await call("/v1/chat/completions", {"messages": []})
        t.cancel()
        return status, out, body, held_ticks, bad, plain, grammar

    status, out, body, held_ticks, bad, plain, grammar = asyncio.run(main())
    assert status == 200 and seen[0] == body  # passed on unchanged, once compiled
    assert held_ticks > 20  # the event loop ran while the worker compiled
    vocab = shared_vocabulary(config.tokenizer, 512)[1]
    assert GrammarLibrary(vocab, cache=tmp_path).on_disk(GrammarSpec(text=grammar))
    assert bad[0] == 400 and b"does not compile" in bad[1] and len(seen) == 2  # refused; not passed on
    assert plain[0] == 200 and seen[1] == plain[2]


FORMATS = ["search_replace", "udiff", "apply_patch", "str_replace"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_edits_in_other_formats_run_through_the_engine_with_search_text_appended(setup, fmt):
    """A teacher-forced oracle program in each format: the engine decodes under the format's grammar
    and the document constraint (the document goes with the request), the client appends forced runs,
    search text included; the same program and text as in process."""
    from cad_outlines.edits.formats import oracle_text
    from cad_outlines.serving.editing.editor import ServedEditor

    library, grammar, encoder, tables = setup
    script = oracle_text(DOC, AFTER, fmt)
    editor = ServedEditor(None, encoder.tokenizer, vocab=encoder.vocab, cache=library.cache)
    runs = {}
    for k in (0, 1):
        engine = SimulatedEngine(grammar, tables, encoder, library=library)
        edit = editor.new_edit(DOC, "fish", script=script, forced_min_run=k, format=fmt)
        events = list(stream_edits(engine, [edit]))
        runs[k] = events[-1][1].result, events
    (plain, _), (merged, events) = runs[0], runs[1]
    for r in (plain, merged):
        assert r.complete and r.text == AFTER and r.program_text == script and r.format == fmt and r.error is None
    assert [e.op for _, e in events if e.kind == "hunk"] == list(merged.program.hunks)
    assert merged.stats.fast_forwarded_tokens > plain.stats.fast_forwarded_tokens  # search text appended
    assert merged.stats.steps < plain.stats.steps
    ids = script_program_ids(editor.grammar_for(fmt), encoder, script, format=fmt, document=DOC)
    assert b"".join(encoder.vocab.token_bytes[t] for t in ids) == script.encode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_sampled_edits_in_other_formats_always_apply(setup, fmt):
    from cad_outlines.edits.formats import get_format
    from cad_outlines.serving.editing.editor import ServedEditor

    library, grammar, encoder, tables = setup
    editor = ServedEditor(None, encoder.tokenizer, vocab=encoder.vocab, cache=library.cache, format=fmt)
    edits = [editor.new_edit(DOC, "x", max_new_tokens=40 + 20 * i) for i in range(3)]
    for r in run_edits(SimulatedEngine(grammar, tables, encoder, library=library), edits):
        assert r.error is None and r.format == fmt
        if r.complete:
            assert get_format(fmt).apply(r.program, DOC) == r.text
        else:
            assert r.stop_reason == "max_new_tokens"


def test_a_document_over_the_limit_is_refused_by_admission():
    from cad_outlines.serving.constraints.admission import AdmissionError, admit
    from cad_outlines.serving.limits import server_limits

    limits = server_limits().replace(max_document_bytes=10)
    args = {"cad_grammar": "udiff", "cad_n_lines": 1, "cad_format": "udiff", "cad_document": "x" * 11}
    with pytest.raises(AdmissionError, match="cad_document.*max_document_bytes"):
        admit(args, limits=limits)
    assert admit(dict(args, cad_document="x" * 10), limits=limits).edit.document == "x" * 10
