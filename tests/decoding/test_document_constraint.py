"""The document constraint of the diff-style formats: its token mask is exactly "the scanner reads
the token's bytes", random programs sampled under grammar AND constraint always apply, search text
that would match twice or nowhere is masked out, and oracle programs of real edits are accepted
token by token with real tokenizers."""

import gzip
import json
import random
import zlib

import numpy as np
import pytest

from cad_outlines import Matcher, Vocabulary, compile_grammar
from cad_outlines.decoding.document_constraint import DocumentConstraint
from cad_outlines.decoding.encoding import TokenEncoder
from cad_outlines.edits.formats import EDIT_FORMATS, get_format
from cad_outlines.edits.formats.hunks import InexpressibleEditError
from cad_outlines.grammars import grammar_path
from tests.fixture_data import SMALL

FORMATS = [f for f in EDIT_FORMATS if f != "copy"]
LINES = ["a", "b", "a b", "", "x = 1", "    return x", "é", "\"q\" \\ /", "\t-", "=======", "@@ x"]


@pytest.fixture(scope="module")
def gpt2():
    return Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")


@pytest.fixture(scope="module")
def grammars(gpt2):
    return {f: compile_grammar(grammar_path(get_format(f).grammar), gpt2) for f in FORMATS}


def random_document(rng: random.Random) -> str:
    lines = [rng.choice(LINES) for _ in range(rng.randint(0, 9))]
    text = "\n".join(lines)
    if lines and rng.random() < 0.8:
        text += "\n"
    return text


def random_edit(rng: random.Random, doc: str) -> str:
    lines = doc.split("\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines) + 1)
        if rng.random() < 0.5 and i < len(lines):
            del lines[i]
        else:
            lines.insert(i, rng.choice(LINES + ["new", "z = 2"]))
    return "\n".join(lines)


def sample_program(rng, fmt, doc, grammar, vocab, max_tokens=240):
    """A random program under the grammar's mask AND the document's (biased to short tokens and line
    ends, so that programs finish); None if cut off."""
    dc = DocumentConstraint(fmt, doc, vocab)
    m = Matcher(grammar)
    toks = vocab.token_bytes
    eos = np.zeros(len(toks), dtype=bool)
    eos[list(vocab.eos_token_ids)] = True
    newline = np.array([b"\n" in t for t in toks])
    short = np.array([0 < len(t) <= 2 for t in toks])
    out = bytearray()
    for _ in range(max_tokens):
        allowed = m.allowed_mask() & dc.mask()
        assert allowed.any(), f"dead end after {bytes(out)!r}"
        forced = dc.forced_bytes()
        assert dc.allows(forced)
        if forced and fmt != "str_replace":  # every allowed token agrees with the forced bytes (str_replace
            for t in np.flatnonzero(allowed & ~eos)[:200].tolist():  # forces the canonical JSON of several)
                assert forced.startswith(toks[t]) or toks[t].startswith(forced), (forced, toks[t])
        if (allowed & eos).any() and (rng.random() < 0.25 or not (allowed & ~eos).any()):
            return bytes(out).decode("utf-8")
        pool = allowed & ~eos
        pick = pool & newline if (pool & newline).any() and rng.random() < 0.3 else pool & short
        ids = np.flatnonzero(pick if pick.any() else pool)
        tok = int(ids[rng.randrange(len(ids))])
        m.advance(tok)
        dc.feed(toks[tok])
        out += toks[tok]
    return None


@pytest.mark.parametrize("fmt", FORMATS)
def test_random_constrained_programs_always_apply(fmt, grammars, gpt2):
    rng = random.Random(zlib.crc32(fmt.encode()))
    fmt_obj = get_format(fmt)
    complete = 0
    for _ in range(80):
        doc = random_document(rng)
        text = sample_program(rng, fmt, doc, grammars[fmt], gpt2)
        if text is None:
            continue
        complete += 1
        fmt_obj.apply(fmt_obj.parse(text), doc)  # raises if it does not apply
    assert complete >= 20


@pytest.mark.parametrize("fmt", FORMATS)
def test_mask_is_exactly_the_tokens_the_scanner_reads(fmt, gpt2):
    """The fast paths (free text, old-line enumeration, tokens across a line end) against reading every
    token of the vocabulary, at every byte boundary of oracle programs."""
    rng = random.Random(7)
    fmt_obj = get_format(fmt)
    toks = gpt2.token_bytes
    specials = gpt2.special_ids
    checked = 0
    for _ in range(6):
        doc = random_document(rng)
        try:
            text = fmt_obj.render(fmt_obj.oracle(doc, random_edit(rng, doc)))
        except InexpressibleEditError:
            continue
        dc = DocumentConstraint(fmt, doc, gpt2)
        data = text.encode()
        for cut in sorted(rng.sample(range(len(data) + 1), min(6, len(data) + 1))):
            dc.state = dc.scanner.initial()
            dc.feed(data[:cut])
            mask = dc.mask()
            want = np.array([t not in specials and bool(toks[t]) and dc.allows(toks[t]) for t in range(len(toks))])
            want[list(gpt2.eos_token_ids)] = dc.eos_ok()
            bad = np.flatnonzero(mask != want)
            assert not len(bad), (text[:cut], [(toks[t], mask[t]) for t in bad[:5]])
            checked += 1
    assert checked >= 10


DUP = "def f():\n    return 1\n\ndef g():\n    return 1\n"


def test_search_text_that_matches_twice_cannot_end_and_absent_text_cannot_start(gpt2):
    byte_tok = {b: i for i, b in enumerate(gpt2.token_bytes) if len(b) == 1}
    dc = DocumentConstraint("search_replace", DUP, gpt2)
    dc.feed(b"<<<<<<< SEARCH\n    return 1\n")  # lines 2 and 5: not unique
    assert not dc.mask()[byte_tok[b"="]]  # the divider may not start
    assert dc.mask()[byte_tok[b"\n"]] or dc.mask()[byte_tok[b"d"]]  # the next line may
    assert not dc.allows(b"=======\n")
    dc2 = DocumentConstraint("search_replace", DUP, gpt2)
    dc2.feed(b"<<<<<<< SEARCH\n")
    assert not dc2.mask()[byte_tok[b"z"]]  # no line starts with "z"
    assert not dc2.allows(b"def h")
    dc2.feed(b"def g():\n    return 1\n")
    assert dc2.allows(b"=======\n")  # unique after its first line
    # udiff: a hunk whose old lines occur twice may not end, at EOS or at the next header
    du = DocumentConstraint("udiff", DUP, gpt2)
    du.feed(b"@@ ... @@\n-    return 1\n+    return 2\n")
    assert not du.eos_ok() and not du.allows(b"@")
    assert du.allows(b"\n") is False and du.allows(b" \n")  # a context line (the blank one) may follow
    # apply_patch: an anchor must be a line at or after the cursor; context after it is unique
    da = DocumentConstraint("apply_patch", DUP, gpt2)
    assert not da.allows(b"@@ def h():\n")
    da.feed(b"@@ def g():\n")
    assert da.allows(b"-    return 1\n*** End Patch")
    # str_replace: old_str escaped in JSON, closing only where unique
    ds = DocumentConstraint("str_replace", DUP, gpt2)
    ds.feed(b'{"old_str": "')
    assert not ds.allows(b'    return 1\\n"')
    assert ds.allows(b'def g():\\n    return 1\\n"')
    assert ds.allows(b'def g():\\u000a    return 1\\n"') and not ds.allows(b'def h')


def test_forced_bytes_once_unique(gpt2):
    dc = DocumentConstraint("search_replace", DUP, gpt2)
    dc.feed(b"<<<<<<< SEARCH\ndef g")
    assert dc.forced_bytes() == b"():\n"  # one candidate: the rest of the line is forced
    dc.feed(b"():\n")
    assert dc.forced_bytes() == b""  # continue or stop: the model decides
    doc = "A\nB\nA\n"  # a search for line 3 alone can never be unique: "A" forces "\nB\n"
    d2 = DocumentConstraint("search_replace", doc, gpt2)
    d2.feed(b"<<<<<<< SEARCH\nA")
    assert d2.forced_bytes() == b"\nB\n"


def _cases(data_dir, limit):
    with gzip.open(data_dir / "edits" / "commits" / "click.jsonl.gz", "rt", encoding="utf-8") as f:
        for raw, _ in zip(f, range(limit)):
            d = json.loads(raw)
            yield d["before"], d["after"]


def teacher_force(fmt, before, after, grammar, vocab, encoder):
    """The oracle program, tokenized as the tokenizer writes it, token by token under both masks."""
    f = get_format(fmt)
    text = f.render(f.oracle(before, after))
    dc = DocumentConstraint(fmt, before, vocab)
    m = Matcher(grammar)
    for t in encoder.encode(text):
        allowed = m.allowed_mask() & dc.mask()
        assert allowed[t], (fmt, vocab.token_bytes[t])
        m.advance(t)
        dc.feed(vocab.token_bytes[t])
    assert dc.eos_ok() and m.is_accepting()
    return text


@pytest.mark.parametrize("fmt", FORMATS)
def test_oracle_programs_of_real_edits_are_accepted_token_by_token_gpt2(fmt, grammars, gpt2):
    from transformers import AutoTokenizer

    encoder = TokenEncoder(AutoTokenizer.from_pretrained(SMALL / "tokenizers" / "gpt2"), gpt2)
    before = (SMALL.parent.parent / "cad_outlines" / "edits" / "oracle.py").read_text()
    after = before.replace("def approx_token_count", "def approx_token_count_v2").replace("    return len(", "    return 0 + len(", 1)
    teacher_force(fmt, before, after, grammars[fmt], gpt2, encoder)


@pytest.mark.shared_data
@pytest.mark.parametrize("fmt", FORMATS)
def test_oracle_programs_of_real_commits_are_accepted_token_by_token_qwen(fmt, data_dir):
    from transformers import AutoTokenizer

    path = data_dir / "tokenizers" / "qwen2.5"
    vocab = Vocabulary.from_tokenizer(path)
    encoder = TokenEncoder(AutoTokenizer.from_pretrained(path), vocab)
    grammar = compile_grammar(grammar_path(get_format(fmt).grammar), vocab)
    n = 0
    for before, after in _cases(data_dir, 3):
        teacher_force(fmt, before, after, grammar, vocab, encoder)
        n += 1
    assert n == 3
