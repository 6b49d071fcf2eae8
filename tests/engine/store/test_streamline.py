"""Streamlined mask stores give the same masks as the original ones, with fewer rows."""

import random

import numpy as np
import pytest

from cad_outlines import grammar_path
from cad_outlines.engine.compile import compile_grammar, load_lark
from cad_outlines.engine.store.grammar_analysis import START, GrammarAnalysis, LRGame
from cad_outlines.engine.matcher import Matcher
from cad_outlines.engine.reference.matcher import ReferenceMatcher
from cad_outlines.engine.store.streamline import STEPS, config_contexts, one_hop_only, streamline
from cad_outlines.engine.vocabulary import Vocabulary
from cad_outlines.grammar_report import analyze_grammar
from tests.fixture_data import require_shared
from tests.helpers import JSON, ToyVocab, index_equals_scalar, PY

def both(grammar, vocab, **kw):
    raw = compile_grammar(grammar, vocab, cache=False, progress=False, streamline=False, **kw)
    slim = compile_grammar(grammar, vocab, cache=False, progress=False, **kw)
    return raw, slim


def compare_walks(raw, slim, n_states: int, seed: int = 0) -> int:
    """Random constrained walks; asserts identical masks at every state; returns the
    parser checks saved."""
    rng = random.Random(seed)
    eos = set(raw.eos_token_ids)
    seen, saved = 0, 0
    while seen < n_states:
        a, b = Matcher(raw), Matcher(slim)
        for _ in range(60):
            ma, mb = a.allowed_mask(), b.allowed_mask()
            seen += 1
            assert np.array_equal(ma, mb), (seen, np.flatnonzero(ma != mb)[:5])
            allowed = np.flatnonzero(ma)
            if not len(allowed):
                break
            tok = int(allowed[rng.randrange(len(allowed))])
            if tok in eos:
                break
            a.advance(tok)
            b.advance(tok)
        saved += a.parser_checks - b.parser_checks
    return saved


@pytest.mark.parametrize("text,start", [(JSON, None), (PY, None)])
def test_toy_vocabulary_masks_identical(text, start):
    vocab = ToyVocab.make()
    raw, slim = both(text, vocab, start=start)
    assert slim.streamlined and slim.store.n_rows < raw.store.n_rows
    assert compare_walks(raw, slim, 1500) > 0


@pytest.mark.parametrize("name", ["gpt2", pytest.param("qwen2.5", marks=pytest.mark.shared_data)])
def test_copy_edit_and_json_with_real_tokenizers(name, small_data):
    data = small_data if name == "gpt2" else require_shared()
    vocab = Vocabulary.from_tokenizer(data / "tokenizers" / name)
    for grammar in (grammar_path("copy_edit"), small_data / "grammars" / "outlines" / "json.lark"):
        raw, slim = both(grammar, vocab)
        assert slim.store.n_rows * 2 < raw.store.n_rows
        compare_walks(raw, slim, 400)


def test_steps_only_shrink_and_beat_one_hop_pruning():
    vocab = ToyVocab.make()
    raw = compile_grammar(PY, vocab, cache=False, progress=False, streamline=False)
    ga = GrammarAnalysis.from_lark(load_lark(PY))
    result = streamline(raw.store, raw.lexer, ga, lr=LRGame(raw.tables))
    rows = [s.rows for s in result.steps]
    assert [s.name for s in result.steps] == list(STEPS)
    assert rows == sorted(rows, reverse=True) and rows[-1] < rows[0]
    assert result.store.n_rows == rows[-1]
    contexts = config_contexts(raw.lexer, raw.store.configs)
    assert one_hop_only(raw.store, raw.lexer, ga, contexts) >= rows[-1]


@pytest.mark.parametrize("text", [JSON, "copy_edit"])
def test_contexts_hold_the_label_before_each_lexeme(text):
    """The label before the current lexeme of every live configuration met on random
    walks (the last pending label, else the parser's last shifted terminal) is among
    the contexts computed for that configuration."""
    vocab = ToyVocab.make()
    grammar = grammar_path("copy_edit") if text == "copy_edit" else text
    raw = compile_grammar(grammar, vocab, cache=False, progress=False, streamline=False)
    contexts = config_contexts(raw.lexer, raw.store.configs)
    accessing = LRGame(raw.tables).accessing
    names = raw.label_names
    rng = random.Random(1)
    for _ in range(60):
        m = ReferenceMatcher(raw)  # its live configurations and parser are inspected
        for _ in range(40):
            for cfg, pending, _acc in m.live:
                if pending:
                    expected = names[pending[-1]]
                else:
                    expected = accessing.get(m.parser.node.state, START)
                assert expected in contexts[cfg], (expected, contexts[cfg])
            allowed = [t for t in np.flatnonzero(m.allowed_mask()) if t not in raw.eos_token_ids]
            if not allowed:
                break
            m.advance(int(rng.choice(allowed)))


def test_analyze_report_round_trip(small_data, tmp_path):
    vocab = Vocabulary.from_tokenizer(small_data / "tokenizers" / "gpt2")
    text = '{"a": [1, 2, {"b": null}], "c": "d"}'
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(small_data / "tokenizers" / "gpt2" / "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids
    report = analyze_grammar(small_data / "grammars" / "outlines" / "json.lark", vocab, document="doc.json",
                             document_tokens=ids, tokenizer_name="gpt2", cache=tmp_path, progress=False)
    assert report.identical_masks == (len(ids) + 1, len(ids) + 1)
    original, streamlined = report.decode
    assert streamlined.parser_calls_mean < original.parser_calls_mean
    assert report.steps[-1]["rows"] < report.steps[0]["rows"] <= 2 * report.syncode_rows * 10
    files = report.save(tmp_path, "json")
    assert all(f.exists() for f in files)
    assert "Interchangeable terminals" in files[0].read_text()
    assert "Rows by context" in files[0].read_text()


def test_rows_by_context_counts_against_brute_force(small_data, tmp_path):
    """The context table: class totals are the stores' row counts; the blog measure equals
    a plain loop over (configuration, preceding label, row)."""
    from cad_outlines.engine.store.streamline import _label_view
    from cad_outlines.grammar_report import rows_by_context

    vocab = Vocabulary.from_tokenizer(small_data / "tokenizers" / "gpt2")
    raw = compile_grammar(PY, vocab, streamline=False, cache=tmp_path, progress=False)
    lk = load_lark(PY)
    ga = GrammarAnalysis.from_lark(lk, "start")
    result = streamline(raw.store, raw.lexer, ga)
    got = rows_by_context(raw.store, result.store, raw.lexer, ga, result.contexts)
    classes = got["classes"].values()
    assert sum(c["configs"] for c in classes) == len(raw.store.configs)
    assert sum(c["original"] for c in classes) == raw.store.n_rows
    assert sum(c["streamlined"] for c in classes) == result.store.n_rows
    _, _, name = _label_view(raw.lexer)
    for which, store in (("original", raw.store), ("streamlined", result.store)):
        want = 0
        for q, rows in enumerate(store.rows):
            for y in result.contexts[q]:
                for e, n, _ in rows:
                    seq = [name(x) for x in e]
                    ok = ga.chain_possible(seq, after=y)
                    if ok and n:
                        ok = any(x < 0 or ga.chain_possible(seq + [name(x)], after=y) for x in n)
                    want += ok
        assert got["per_label"][which] == want
    assert got["per_label"]["original"] >= got["per_label"]["streamlined"] > 0


def test_shared_walk_equals_scalar_lexer_under_an_indenter():
    """The byte-automaton walk, parts shared across configs, carries NEWLINE indentation
    exactly as the scalar lexer does (relative in a carried lexeme, absolute after a break)."""
    from cad_outlines.engine.store.lexer import Lexer
    from cad_outlines.engine.store.lexer import lexer_spec_from_lark

    lexer = Lexer(lexer_spec_from_lark(load_lark(PY)))
    assert lexer.spec.indent_owner is not None
    seen = index_equals_scalar(lexer, ToyVocab.make())
    assert len(seen) > 10


@pytest.mark.parametrize("grammar", [JSON, PY, "copy_edit"])
def test_viable_labels_of_the_byte_automaton_equal_the_scalar_ones(grammar):
    from cad_outlines.engine.store.lexer import Lexer
    from cad_outlines.engine.reference.store_builder import ByteAutomaton
    from cad_outlines.engine.store.lexer import lexer_spec_from_lark

    lk = load_lark(grammar_path(grammar) if grammar == "copy_edit" else grammar)
    scalar = Lexer(lexer_spec_from_lark(lk))
    auto = ByteAutomaton(Lexer(lexer_spec_from_lark(lk)))
    viable = auto.viable_labels()
    assert len(viable) == auto.n_states > 5
    assert any(viable.values())
    for cfg, labels in viable.items():
        assert scalar.viable_labels(scalar.table.id(cfg)) == labels, cfg


def test_token_bytes_matrix():
    from cad_outlines.engine.reference.store_builder import TokenBytes

    tb = [b"ab", b"", b"xyz", b"q", b"\x00\xff"]
    t = TokenBytes.from_bytes(tb, banned=[3])
    assert t.ids.tolist() == [0, 2, 4] and t.lengths.tolist() == [2, 3, 2]
    assert t.data.tolist() == [[97, 98, 0], [120, 121, 122], [0, 255, 0]]


def test_compile_profile_records_every_cold_phase(tmp_path):
    from cad_outlines.engine.compile_profile import COLD_PHASES, CompileProfile

    vocab = ToyVocab.make()
    prof = CompileProfile()
    compile_grammar(PY, vocab, cache=tmp_path, progress=False, profile=prof)
    assert [p.name for p in prof.phases] == list(COLD_PHASES)
    assert all(p.seconds >= 0 and p.cpu_seconds >= 0 for p in prof.phases)
    warm = CompileProfile()
    compile_grammar(PY, vocab, cache=tmp_path, progress=False, profile=warm)
    assert [p.name for p in warm.phases] == ["load flat arrays"]  # memory-mapped: no lark, no store
    for f in tmp_path.glob("flat-*.bin"):
        f.unlink()
    again = CompileProfile()
    compile_grammar(PY, vocab, cache=tmp_path, progress=False, profile=again)
    assert [p.name for p in again.phases][-2:] == ["load streamlined store", "flat arrays"]
    updates = []
    from cad_outlines.engine.store.lexer import Lexer
    from cad_outlines.engine.reference.store_builder import TokenBytes
    from cad_outlines.engine.reference.store_builder import build_mask_store
    from cad_outlines.engine.store.lexer import lexer_spec_from_lark

    lexer = Lexer(lexer_spec_from_lark(load_lark(PY)))
    build_mask_store(lexer, TokenBytes.from_bytes(vocab.token_bytes, vocab.special_ids), vocab.size,
                     progress=lambda done, total: updates.append((done, total)))
    assert len({total for _, total in updates}) == 1  # the store bar's total never moves
    assert [d for d, _ in updates] == list(range(1, len(updates) + 1))
