"""The fast oracle gives the very programs of the quadratic reference DP (analysis/references/oracle_quadratic.py):
the same ops, hence the same cost and the same tie-breaks, for both policies, both separators and several counters."""

import gzip
import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines import oracle_program, resolve, split_lines
from cad_outlines.edits.program import Copy
from tests.fixture_data import SMALL
from analysis.references.oracle_quadratic import oracle_program_quadratic


def per_digit(text: str) -> int:
    """Like Qwen2.5 and SentencePiece: one token per digit, so longer line numbers cost more."""
    return len(re.findall(r"\d|\w+|[^\w\s]|\s+", text))


def sevens(text: str) -> int:
    """Tags differ by their digits in a way unrelated to their length: a 7 costs 4 more."""
    return len(text) + 4 * text.count("7")


COUNTERS = {"approx": None, "len": len, "per_digit": per_digit, "sevens": sevens, "constant": lambda t: 3}

# few distinct lines, so that matches repeat, overlap and tie
line = st.sampled_from(["a\n", "b\n", "cc\n", "\n", "a", "dd d\n", "x\r\n"])


@st.composite
def edit_pairs(draw):
    src = draw(st.lists(line, max_size=14))
    before = "".join(l if l.endswith("\n") else l + "\n" for l in src[:-1]) + (src[-1] if src else "")
    lines = split_lines(before)
    out = []
    for _ in range(draw(st.integers(0, 8))):
        if lines and draw(st.booleans()):
            i = draw(st.integers(0, len(lines) - 1))
            out.extend(l if l.endswith("\n") else l + "\n" for l in lines[i : i + draw(st.integers(1, 6))])
        else:
            out.append(draw(line).rstrip("\r\n") + "\n")
    after = "".join(out)
    return before, after[:-1] if draw(st.booleans()) else after


@given(edit_pairs(), st.sampled_from(["max_copy", "min_tokens"]), st.sampled_from(["\n", ""]),
       st.sampled_from(sorted(COUNTERS)))
@settings(max_examples=400, deadline=None)
def test_fast_oracle_equals_quadratic_reference(pair, policy, sep, counter):
    before, after = pair
    kw = dict(policy=policy, sep=sep, count_tokens=COUNTERS[counter])
    fast = oracle_program(before, after, **kw)
    assert fast == oracle_program_quadratic(before, after, **kw), (before, after)
    assert resolve(fast, before) == after


@pytest.mark.parametrize("seed", range(6))
def test_fast_oracle_equals_reference_on_longer_documents_with_long_matches(seed):
    """Documents of 80-150 lines, edited in a few places: long diagonal matches that cross 2- and 3-digit line
    numbers, repeated blocks and many blank lines; every counter, policy and separator."""
    rng = random.Random(seed)
    vocab = [f"line {i}\n" for i in range(25)] + ["\n"] * 8 + ["    pass\n"] * 3
    src = [rng.choice(vocab) for _ in range(rng.randint(80, 150))]
    out = list(src)
    for _ in range(rng.randint(1, 5)):  # replace, insert, delete or duplicate a block
        i, n = rng.randrange(len(out)), rng.randint(1, 6)
        kind = rng.randrange(4)
        if kind == 0:
            out[i : i + n] = [f"new {rng.randrange(99)}\n" for _ in range(n)]
        elif kind == 1:
            out[i:i] = [rng.choice(vocab) for _ in range(n)]
        elif kind == 2:
            del out[i : i + n]
        else:
            j = rng.randrange(len(src))
            out[i:i] = src[j : j + 3 * n]
    before, after = "".join(src), "".join(out)
    for counter in COUNTERS.values():
        for policy in ("max_copy", "min_tokens"):
            for sep in ("\n", ""):
                kw = dict(policy=policy, sep=sep, count_tokens=counter)
                assert oracle_program(before, after, **kw) == oracle_program_quadratic(before, after, **kw)


def test_fast_oracle_equals_reference_with_a_real_tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(SMALL / "tokenizers" / "gpt2" / "tokenizer.json"))

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    rng = random.Random(7)
    src = [f"    value_{rng.randrange(40)} = {rng.randrange(5)}\n" if rng.random() < 0.8 else "\n" for _ in range(120)]
    out = src[:30] + ["    changed = 1\n"] + src[31:90] + src[10:20] + src[95:]
    before, after = "".join(src), "".join(out)
    for policy in ("max_copy", "min_tokens"):
        for sep in ("\n", ""):
            kw = dict(policy=policy, sep=sep, count_tokens=count)
            assert oracle_program(before, after, **kw) == oracle_program_quadratic(before, after, **kw)


def test_tag_costs_decide_which_source_like_the_reference():
    """x is line 2 and line 13 of `before`. Every tag costs the same under the default counter, so the earliest
    copy wins; a counter that makes the tag of line 2 dearer sends both oracles to line 13."""
    before = "y\nx\n" + "".join(f"{i}\n" for i in range(1, 11)) + "x\n"
    assert oracle_program(before, "x\n").ops == (Copy(2, 2),)

    def dear_first(text: str) -> int:
        return len(text) + (10 if '"2-2"' in text else 0)

    fast = oracle_program(before, "x\n", count_tokens=dear_first)
    assert fast.ops == (Copy(13, 13),)
    assert fast == oracle_program_quadratic(before, "x\n", count_tokens=dear_first)


def test_a_counter_that_prices_a_tag_below_the_first_line_tag_is_refused():
    def cheap_two(text: str) -> int:
        return 1 if '"2-2"' in text else len(text)

    with pytest.raises(ValueError, match=r'<copy lines="2-2"/>.*fewer tokens than.*<copy lines="1-1"/>'):
        oracle_program("a\nb\n", "b\n", count_tokens=cheap_two)


@pytest.mark.shared_data
def test_fast_oracle_equals_reference_on_a_real_long_file(data_dir):
    """The longest `click` file of under 400 lines (the reference takes about a second on it)."""
    with gzip.open(data_dir / "edits" / "commits" / "click.jsonl.gz", "rt", encoding="utf-8") as f:
        cases = [json.loads(raw) for raw in f]
    case = max((c for c in cases if c["lines_before"] < 400), key=lambda c: (c["lines_before"], c["id"]))
    before, after = case["before"], case["after"]
    for policy, sep, count in (("max_copy", "\n", None), ("min_tokens", "", per_digit)):
        kw = dict(policy=policy, sep=sep, count_tokens=count)
        fast = oracle_program(before, after, **kw)
        assert fast == oracle_program_quadratic(before, after, **kw), case["id"]
        assert resolve(fast, before) == after
