"""The edit endpoint's input checks and the one-request bookkeeping, without vLLM: what a
``/v1/cad/edits`` body may hold, and how a segment's prompt becomes the chunk appended to
an edit's live request (tests/serving/test_serving_edits.py runs both on a real engine)."""

import json

import pytest

from cad_outlines.errors import RequestError
from cad_outlines.serving.http.edit_endpoint import FIELDS, EditRequestError, parse_edit_body
from cad_outlines.serving.limits import ServerLimits
from cad_outlines.serving.editing.session_channel import SessionTokens


def body(**fields) -> bytes:
    return json.dumps({"document": "a\nb\n", "instruction": "x", **fields}).encode()


def test_a_good_body_gives_the_job_with_defaults_and_given_parameters():
    job = parse_edit_body(body())
    assert (job.document, job.instruction, job.temperature, job.top_p, job.seed) == ("a\nb\n", "x", 0.0, 1.0, None)
    job = parse_edit_body(body(max_tokens=7, temperature=0.5, top_p=0.9, seed=3, model="m"), served_models=("m",))
    assert (job.max_tokens, job.temperature, job.top_p, job.seed) == (7, 0.5, 0.9, 3)
    assert set(FIELDS) == {"document", "instruction", "model", "max_tokens", "temperature", "top_p", "seed", "format"}
    assert job.format == "copy" and parse_edit_body(body(format="udiff")).format == "udiff"


@pytest.mark.parametrize("raw, status, words", [
    (b'{"instruction": "x"}', 400, "document is missing"),
    (b'{"document": "a"}', 400, "instruction is missing"),
    (b'{"document": 5, "instruction": "x"}', 400, "document must be a string"),
    ('{"document": "\xff", "instruction": "x"}'.encode("latin-1"), 400, "not UTF-8"),
    (b'{"document": "\\ud800", "instruction": "x"}', 400, "lone surrogate"),
    (b"[1, 2]", 400, "must be a JSON object"),
    (b"{", 400, "not JSON"),
    (body(stop=["x"]), 400, "unknown field(s) ['stop']"),
    (body(max_tokens=0), 400, "max_tokens must be in"),
    (body(max_tokens=True), 400, "max_tokens must be an integer"),
    (body(temperature=3), 400, "temperature must be in"),
    (body(top_p=0), 400, "top_p must be in"),
    (b'{"document": "a", "instruction": "x", "temperature": NaN}', 400, "temperature must be a number"),
    (body(seed=1.5), 400, "seed must be an integer"),
    (body(model="other"), 404, "not served here"),
    (body(format="diff"), 400, "unknown format 'diff': use one of copy, search_replace, udiff, apply_patch"),
    (body(format=["udiff"]), 400, "unknown format a list"),
    (b" " * (ServerLimits().max_edit_body_bytes + 1), 413, "limit"),
])
def test_a_bad_body_is_refused_with_one_line_naming_what_is_wrong(raw, status, words):
    with pytest.raises(EditRequestError) as info:
        parse_edit_body(raw, served_models=("m",))
    message = str(info.value)
    assert info.value.status == status and words in message and "\n" not in message
    assert isinstance(info.value, RequestError)


def test_session_tokens_append_only_what_extends_the_request():
    s = SessionTokens()
    assert s.chunk([1, 2, 3]) == [1, 2, 3]
    assert not s.output([7], None) and not s.output([8, 9], None)
    assert s.output([0], "stop")  # the turn ends with the EOS (0): never computed, not kept
    assert s.held == [1, 2, 3, 7, 8, 9] and s.turns == 1
    assert s.chunk([1, 2, 3, 7, 8, 9, 4, 4]) == [4, 4]  # the client's context: sampled tokens + copied lines
    for bad, why in [([1, 2, 3, 7, 8, 9, 4, 4], "adds nothing"), ([1, 2, 3, 7, 0, 9, 4, 4, 5], "does not extend")]:
        with pytest.raises(ValueError, match=why):
            s.chunk(bad)
    assert s.held == [1, 2, 3, 7, 8, 9, 4, 4]
