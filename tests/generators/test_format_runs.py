"""The edit loop with the diff-style formats (``format=``): teacher-forced oracle programs give the
edit with search text forced once unique, sampled constrained programs always apply, the
unconstrained mode decodes every token and applies at the end, and the one switch refuses unknown
formats."""

import pytest

from cad_outlines.edits.formats import EDIT_FORMATS, get_format, oracle_text
from cad_outlines.errors import ParameterError
from cad_outlines.generators.copy_decode import CopyEditor, Sampling, apply_edit

FORMATS = [f for f in EDIT_FORMATS if f != "copy"]
DOC = ("Once upon a time there was a cat.\nThe cat liked milk.\nOne day the cat saw a dog.\nThey became friends.\n"
       "The cat liked milk.\nThe end.\n")
AFTER = DOC.replace("saw a dog", "saw a bird").replace("The end.", "The very end.")


@pytest.fixture(scope="module")
def editors(tiny, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return {f: CopyEditor(*tiny, cache=cache, format=f) for f in FORMATS}


@pytest.mark.parametrize("fmt", FORMATS)
def test_teacher_forced_oracle_program_gives_the_edit_with_search_text_forced(editors, fmt):
    ed = editors[fmt]
    text = oracle_text(DOC, AFTER, fmt)
    events = list(ed.stream(DOC, "", script=text, max_new_tokens=10**6, stop_at_context=False))
    result = events[-1].result
    assert result.complete and result.stop_reason == "end" and result.error is None
    assert result.text == AFTER and result.format == fmt and result.program_text == text
    assert result.program == get_format(fmt).parse(text)
    assert [e.op for e in events if e.kind == "hunk"] == list(result.program.hunks)
    s = result.stats
    program_tokens = len(ed.encode(text))
    assert s.fast_forwarded_tokens > 0  # search text and markers entered without a choice
    assert s.generated_tokens < program_tokens
    assert s.total_forwards - s.forwards["prompt"] <= s.generated_tokens  # at most a forward per choice
    # the same program unconstrained: every token chosen, one forward each, then applied
    free = ed.execute(DOC, text, constrained=False)
    assert free.complete and free.text == AFTER and free.error is None
    assert free.stats.fast_forwarded_tokens == 0
    assert free.stats.generated_tokens == len(ed.encode(text)) + 1  # and EOS
    assert free.stats.forwards["decode"] == free.stats.generated_tokens - 1  # EOS needs no forward after it
    assert s.generated_tokens < free.stats.generated_tokens


@pytest.mark.parametrize("fmt", FORMATS)
def test_sampled_constrained_programs_always_apply(editors, fmt):
    complete = 0
    for seed in range(4):
        result = editors[fmt].edit(DOC, "Make the dog a bird.", max_new_tokens=60,
                                   sampling=Sampling(temperature=1.0, seed=seed))
        assert result.error is None
        if result.complete:
            complete += 1
            assert get_format(fmt).apply(result.program, DOC) == result.text
        else:
            assert result.stop_reason == "max_new_tokens"
    assert complete >= 1


def test_unconstrained_program_that_does_not_apply_reports_it(editors):
    ed = editors["search_replace"]
    bad = "<<<<<<< SEARCH\nThe cat liked milk.\n=======\nx\n>>>>>>> REPLACE\n"  # occurs twice
    with pytest.raises(Exception, match="more than once"):
        ed.execute(DOC, bad)  # checked before the model runs
    result = ed.edit(DOC, "", script=bad, constrained=False, max_new_tokens=10**6)
    assert result.error and "more than once" in result.error and result.text == DOC and not result.complete


def test_one_switch_refuses_unknown_formats(tiny, editors):
    with pytest.raises(ParameterError, match="unknown edit format 'diff'.*copy, search_replace"):
        CopyEditor(*tiny, format="diff")
    with pytest.raises(ParameterError, match="unknown edit format"):
        apply_edit(*tiny, DOC, "x", format="patch")
    with pytest.raises(ParameterError, match="unknown edit format"):
        editors["udiff"].edit(DOC, "x", format="UDIFF")
    with pytest.raises(ParameterError, match="speculative"):
        editors["udiff"].edit(DOC, "x", speculative=2)
    # a per-call format overrides the editor's
    result = editors["udiff"].edit(DOC, "x", format="search_replace", max_new_tokens=5)
    assert result.format == "search_replace"
