"""Resolver exactness, span errors, streaming, and oracle round trips."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines import (
    Copy,
    EditProgram,
    Gen,
    IncompleteProgramError,
    SpanError,
    StreamingResolver,
    iter_resolve,
    oracle_program,
    parse_program,
    resolve,
    split_lines,
)

DOC = "one\ntwo\r\nthree\nfour"


def test_copy_keeps_each_line_ending_and_last_line_without_newline():
    assert resolve(EditProgram([Copy(2, 4)]), DOC) == "two\r\nthree\nfour"
    assert resolve(EditProgram([Copy(4, 4), Gen("!\n"), Copy(1, 1)]), DOC) == "four!\none\n"


@pytest.mark.parametrize("op, n, words", [(Copy(0, 2), 4, "starts before line 1"), (Copy(3, 5), 4, "ends after"),
                                          (Copy(3, 2), 4, "inverted"), (Copy(1, 1), 0, "ends after")])
def test_bad_spans_name_span_and_length(op, n, words):
    doc = DOC if n else ""
    with pytest.raises(SpanError, match=words) as info:
        resolve(EditProgram([op]), doc)
    assert f'lines="{op.start}-{op.end}"' in str(info.value) and f"has {n} lines" in str(info.value)


def test_incomplete_program_is_not_resolved_as_complete():
    """The text of a gen op left open counts, as the streaming resolver passes it on (it was dropped)."""
    program = parse_program('<copy lines="1-1"/><gen>x', partial=True)
    with pytest.raises(IncompleteProgramError) as info:
        resolve(program, DOC)
    assert info.value.partial_text == "one\nx" and info.value.program == program
    assert resolve(program, DOC, partial=True) == "one\nx"
    # a tail that may still become </gen> is held back, as StreamingResolver holds it
    assert resolve('<copy lines="1-1"/><gen>x</ge', DOC, partial=True) == "one\nx"
    assert resolve('<copy lines="1-1"/><copy lines="2-', DOC, partial=True) == "one\n"
    streamed = StreamingResolver(DOC)
    assert streamed.feed('<copy lines="1-1"/><gen>x</ge') == resolve('<copy lines="1-1"/><gen>x</ge', DOC, partial=True)


def test_streaming_resolver_yields_as_ops_arrive():
    text = '<copy lines="1-2"/>\n<gen>NEW\n</gen>\n<copy lines="4-4"/>\n</program>'
    resolver = StreamingResolver(DOC)
    outputs = [resolver.feed(ch) for ch in text]
    assert "".join(outputs) == "one\ntwo\r\nNEW\nfour"
    # the copy arrives the moment its tag closes; gen text streams before </gen>
    assert outputs[text.index("/>") + 1] == "one\ntwo\r\n"
    assert outputs[text.index("NEW")] == "N"
    assert resolver.close().ops == (Copy(1, 2), Gen("NEW\n"), Copy(4, 4))


def test_streaming_resolver_raises_at_bad_span_and_at_cut_off():
    resolver = StreamingResolver(DOC)
    with pytest.raises(SpanError):
        resolver.feed('<copy lines="2-9"/>')
    chunks = ['<copy lines="1-1"/>', "<gen>ab"]
    got = []
    with pytest.raises(IncompleteProgramError):
        for piece in iter_resolve(chunks, DOC):
            got.append(piece)
    assert "".join(got) == "one\nab"


line = st.lists(st.sampled_from(list("ab x\té😀<>/") + ["</gen>", "<copy", "<program>", "</program>", "\r"]),
                max_size=6).map("".join)
ending = st.sampled_from(["\n", "\r\n", "\n", ""])
document = st.lists(st.tuples(line, ending), max_size=8).map(lambda ls: "".join(a + b for a, b in ls))


@st.composite
def edit_pairs(draw):
    before = draw(document)
    lines = split_lines(before)
    after_lines = []
    for _ in range(draw(st.integers(0, 10))):
        if lines and draw(st.booleans()):
            i = draw(st.integers(0, len(lines) - 1))
            after_lines.extend(lines[i : i + draw(st.integers(1, 3))])
        else:
            after_lines.append(draw(line) + draw(ending))
    return before, "".join(after_lines) + draw(st.sampled_from(["", "tail", "\r"]))


@given(edit_pairs(), st.sampled_from(["max_copy", "min_tokens"]), st.sampled_from(["\n", ""]))
@settings(max_examples=400, deadline=None)
def test_oracle_round_trip_property(pair, policy, sep):
    before, after = pair
    program = oracle_program(before, after, policy=policy, sep=sep)
    assert resolve(program, before) == after
    assert resolve(parse_program(program.to_text(sep=sep)), before) == after


@given(edit_pairs())
@settings(max_examples=200, deadline=None)
def test_max_copy_oracle_copies_every_copyable_line_and_merges_adjacent_spans(pair):
    before, after = pair
    program = oracle_program(before, after)
    src = set(split_lines(before))
    for op in program.ops:
        if isinstance(op, Gen):
            assert not any(l in src for l in split_lines(op.text)), (op, before)
    for a, b in zip(program.ops, program.ops[1:]):
        assert not (isinstance(a, Copy) and isinstance(b, Copy) and b.start == a.end + 1)
        if isinstance(a, Gen) and isinstance(b, Gen):  # only where gen_ops split a "</gen>"
            assert a.text.endswith("</ge") and b.text.startswith("n>")


def test_oracle_is_deterministic_and_prefers_earliest_source():
    before = "x\ny\nx\ny\n"
    assert oracle_program(before, "x\ny\n").ops == (Copy(1, 2),)
    assert oracle_program(before, "y\nx\n").ops == (Copy(2, 3),)


def test_oracle_empty_cases():
    assert oracle_program("", "").ops == ()
    assert oracle_program("a\n", "").ops == ()
    assert oracle_program("", "new").ops == (Gen("new"),)


CORPORA = [f"edits/humanevalpack/{lang}/humanevalpack.jsonl" for lang in ("python", "js", "cpp", "go", "java", "rust")]


@pytest.mark.parametrize("rel", CORPORA + ["edits/editeval/edit_eval.jsonl"])
def test_oracle_round_trips_every_real_case(data_dir, rel):
    n = 0
    for raw in (data_dir / rel).read_text(encoding="utf-8").splitlines():
        d = json.loads(raw)
        if "input" in d:
            before, after = d["input"], d["output"]
        else:
            before, after = d["declaration"] + d["buggy_solution"], d["declaration"] + d["canonical_solution"]
        program = oracle_program(before, after)
        assert resolve(parse_program(program.to_text()), before) == after, d["task_id"]
        n += 1
    assert n in (164, 194)
