"""The serving pieces that need no vLLM: request arguments, per-request constraint
state and batch masks, and the Copy-as-Decode client loop against a simulated engine
(the same state the vLLM processor keeps, a prefix cache in whole blocks)."""

import numpy as np
import pytest

from cad_outlines import oracle_program, resolve, split_lines
from cad_outlines.edits.program import Copy
from cad_outlines.engine.matcher import Matcher
from cad_outlines.serving import ConstraintRequest, GrammarSpec, RequestError
from cad_outlines.serving.backends import Update, run_edits, stream_edits
from cad_outlines.serving.constraint_state import (
    SequenceConstraint, SessionStore, TokenTables, batch_masks, unpack_rows)
from cad_outlines.serving.grammar_library import GrammarLibrary, check_grammar
from cad_outlines.serving.served_edit import SegmentOutcome, ServedEdit, ServingError, script_program_ids

DOC = "Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends."
AFTER = "Once upon a time there was a cat.\nThe cat liked fish.\nOne day the cat saw a dog.\nThey became friends."


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    from cad_outlines.engine.vocabulary import Vocabulary
    from cad_outlines.generators.encoding import TokenEncoder

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
    blocks of 16 tokens; `die_after` requests, it fails."""

    def __init__(self, grammar, tables, die_after=None, block=16):
        self.grammar, self.tables, self.block, self.die_after = grammar, tables, block, die_after
        self.sessions = SessionStore()
        self.scores = np.random.default_rng(0).random(grammar.vocab_size)
        self.cached: set[tuple[int, ...]] = set()
        self.pending: list[Update] = []
        self.requests = 0

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
        state = SequenceConstraint(ConstraintRequest.from_extra_args(seg.extra_args), self.grammar, out,
                                   tables=self.tables, sessions=self.sessions)
        finish = "length"
        while len(out) < seg.max_tokens:
            row = unpack_rows(batch_masks([state], self.grammar.vocab_size), self.grammar.vocab_size)[0]
            tok = int(np.argmax(np.where(row, self.scores, -1)))
            out.append(tok)
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


def test_teacher_forced_edit_resolves_with_cache_hits(setup):
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    engine = SimulatedEngine(grammar, tables)
    edit = ServedEdit(grammar, encoder, DOC, "fish", script=script)
    events = list(stream_edits(engine, [edit]))
    result = events[-1][1].result
    assert result.complete and result.text == AFTER and result.stop_reason == "end"
    copies = [e.op for _, e in events if isinstance(e.op, Copy)]
    assert copies == [op for op in result.program.ops if isinstance(op, Copy)]
    assert result.stats.requests == len(copies) + 1 and result.stats.cached_tokens > 0
    assert engine.sessions.hits == len(copies)  # every later segment resumed its state
    assert "".join(e.text for _, e in events) == AFTER  # streamed text is the new document


@pytest.mark.parametrize("doc", [DOC.replace("\n", "\r\n"), DOC + "\n", "only line"])
def test_sampled_edits_run_concurrently_with_valid_spans(setup, doc):
    library, grammar, encoder, tables = setup
    edits = [ServedEdit(grammar, encoder, doc, "x", max_new_tokens=30 + 10 * i) for i in range(3)]
    results = run_edits(SimulatedEngine(grammar, tables), edits)
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
        r = run_edits(SimulatedEngine(grammar, tables),
                      [ServedEdit(grammar, encoder, doc, "", script=oracle_program(doc, after).to_text())])[0]
        assert r.text == after


def test_a_server_dying_mid_edit_gives_the_partial_program(setup):
    library, grammar, encoder, tables = setup
    script = oracle_program(DOC, AFTER).to_text()
    with pytest.raises(ServingError, match="went away") as info:
        run_edits(SimulatedEngine(grammar, tables, die_after=1), [ServedEdit(grammar, encoder, DOC, "", script=script)])
    partial = info.value.partial
    assert not partial.complete and list(partial.program.ops) == [Copy(1, 1)]
    assert partial.text == split_lines(DOC)[0]
