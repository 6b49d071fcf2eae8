"""One native store builder (``_native/src/lazy_store.cpp``) for eager and lazy grammars.

Eager: the builder run to completion (``Grammar.explore``, ``store/native_store.py``) equals the
Python reference builder (``engine/reference/store_builder.py``) row for row, configurations and
token sets numbered alike, and stops when told to. Lazy (``compile_grammar(..., lazy=True)``): a
lexer configuration's rows are built on first use; every mask equals the eager (streamlined)
grammar's, batches and threads included, and the lazy file is cached and never trusted blindly."""

import os
import random
import threading
import warnings

import numpy as np
import pytest

from cad_outlines import grammar_path
from cad_outlines.engine.compile import compile_grammar, wait_for_cache_writes
from cad_outlines.engine.compile_profile import CompileProfile
from cad_outlines.engine.matcher import Matcher, allocate_token_bitmask, fill_next_token_bitmask_batch, unpack_bitmask
from cad_outlines.engine.reference.store_builder import TokenBytes
from cad_outlines.engine.reference.store_builder import build_mask_store as reference_store
from cad_outlines.engine.store.lexer import Lexer
from cad_outlines.engine.vocabulary import Vocabulary
from tests.fixture_data import SMALL
from tests.helpers import JSON, ToyVocab, encode
from tests.helpers import LOOKAHEAD
from tests.helpers import PY

TEXTS = {"json": JSON, "py": PY, "copy_edit": grammar_path("copy_edit"), "lookahead": LOOKAHEAD}


@pytest.fixture(scope="module")
def vocab():
    return ToyVocab.make()


@pytest.fixture(scope="module", params=list(TEXTS))
def pair(request, vocab):
    text = TEXTS[request.param]
    eager = compile_grammar(text, vocab, cache=False, progress=False)
    lazy = compile_grammar(text, vocab, cache=False, progress=False, lazy=True)
    return eager, lazy


def _reference(g):
    """The Python builder's store for an eager grammar's lexer spec and vocabulary."""
    vocab = g.vocab
    return reference_store(Lexer(g.lexer.spec), TokenBytes.from_bytes(vocab.token_bytes, vocab.special_ids),
                           vocab.size)


def _assert_same_store(native, reference):
    assert native.configs == reference.configs  # the same configurations, numbered alike
    assert native.rows == reference.rows  # the same rows (labels, entered labels, set id), in the same order
    assert native.set_negated == reference.set_negated
    assert len(native.set_ids) == len(reference.set_ids)
    for a, b in zip(native.set_ids, reference.set_ids):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert native.digest() == reference.digest()


@pytest.mark.parametrize("name", list(TEXTS))
def test_native_builder_equals_the_reference_builder(name, vocab):
    g = compile_grammar(TEXTS[name], vocab, cache=False, progress=False, streamline=False)
    ref = _reference(g)
    assert ref.n_rows > len(ref.configs) > 5
    _assert_same_store(g.store, ref)


def test_native_builder_equals_the_reference_builder_on_gpt2():
    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    g = compile_grammar(PY, vocab, cache=False, progress=False, streamline=False)
    ref = _reference(g)
    assert any(len(s) * 2 > vocab.size or neg for s, neg in zip(ref.set_ids, ref.set_negated))  # dense sets too
    _assert_same_store(g.store, ref)


def test_the_native_walk_stops_when_its_callback_raises(vocab):
    """Limits and the deadline are checked in the callback after each configuration (store/native_store.py)."""
    lazy = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    calls = []

    def each(done: int, rows: int) -> None:
        calls.append((done, rows))
        if done == 3:
            raise KeyboardInterrupt("stop")

    with pytest.raises(KeyboardInterrupt, match="stop"):
        lazy.native.explore(each)
    assert [d for d, _ in calls] == [1, 2, 3] and calls[-1][1] > 0
    # after masks built some rows (and the stopped walk others), a whole walk numbers and builds as a fresh one
    m = Matcher(lazy)
    for tok in encode(vocab, b"def f(x):\n    return x\n"):
        m.allowed_mask()
        m.advance(tok)
    fresh = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    a, b = lazy.native.explore(lambda *_: None), fresh.native.explore(lambda *_: None)
    for name in ("numbered", "visited", "same_as", "row_off", "labels", "row_ent"):
        assert np.array_equal(a[name], b[name]), name
    eager = compile_grammar(JSON, vocab, cache=False, progress=False)
    with pytest.raises(ValueError, match="needs a lazy grammar"):
        eager.native.explore(each)


def lockstep_walk(eager, lazy, seed: int, steps: int = 80):
    """A random walk over the eager grammar's masks; yields both matchers at each state."""
    rng = random.Random(seed)
    me, ml = Matcher(eager), Matcher(lazy)
    for _ in range(steps):
        yield me, ml
        allowed = np.flatnonzero(me.allowed_mask())
        if not len(allowed) or me.is_finished():
            return
        tok = int(allowed[rng.randrange(len(allowed))])
        me.advance(tok)
        ml.advance(tok)


def test_lazy_masks_equal_eager_on_walks(pair):
    eager, lazy = pair
    assert lazy.lazy and not eager.lazy and not lazy.streamlined
    positions = 0
    for seed in range(12):
        for me, ml in lockstep_walk(eager, lazy, seed):
            assert np.array_equal(me.allowed_mask(), ml.allowed_mask()), f"seed {seed} position {positions}"
            assert me.is_accepting() == ml.is_accepting()
            positions += 1
    assert positions > 200


def test_rows_are_built_on_first_use_only(vocab):
    g = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    native = g.native
    assert native.lazy and native.configs_built == 0 and native.n_configs > 1
    m = Matcher(g)
    m.allowed_mask()
    assert native.configs_built == 1 and native.is_built(0)
    sets = native.n_sets
    m.allowed_mask()  # a second mask builds nothing
    assert native.configs_built == 1 and native.n_sets == sets
    for tok in encode(vocab, b"def f(x):\n    return x\n"):
        m.advance(tok)
        m.allowed_mask()
    assert 1 < native.configs_built < native.n_configs  # only the configurations this text reached
    with pytest.raises(ValueError, match="no lexer configuration"):
        native.build_config(native.n_configs)


def test_python_indentation_teacher_forced(vocab):
    text = b"def f(a, b):\n    if a:\n        x = (a +\n  b)\n        return x\n    return b\n\nx = f(1, 2)\n"
    eager = compile_grammar(PY, vocab, cache=False, progress=False)
    lazy = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    me, ml = Matcher(eager), Matcher(lazy)
    for tok in encode(vocab, text):
        assert np.array_equal(me.allowed_mask(), ml.allowed_mask())
        me.advance(tok)
        ml.advance(tok)
    assert ml.is_accepting()


def test_batch_builds_what_it_needs_and_equals_single_calls(vocab):
    """A batch mixing lazy and eager grammars; the lazy rows it lacks are built inside the call."""
    eager = compile_grammar(JSON, vocab, cache=False, progress=False)
    lazy_py = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    lazy_json = compile_grammar(JSON, vocab, cache=False, progress=False, lazy=True)
    rng = random.Random(3)
    ms = []
    for g in (eager, lazy_py, lazy_json, lazy_py):
        m = Matcher(g)
        for _ in range(rng.randrange(1, 12)):
            allowed = np.flatnonzero(m.allowed_mask())
            allowed = [t for t in allowed.tolist() if t not in g.eos_token_ids]
            if not allowed:
                break
            m.advance(rng.choice(allowed))
        ms.append(m)
    # fresh forks: their live configurations may not be built yet in the batch below
    forks = [m.fork() for m in ms]
    bitmask = allocate_token_bitmask(len(forks), vocab.size)
    fill_next_token_bitmask_batch(forks, bitmask)
    for i, m in enumerate(ms):
        assert np.array_equal(unpack_bitmask(bitmask[i], vocab.size), m.allowed_mask())


def test_threads_share_one_lazy_grammar(vocab):
    """Masks from several threads at once, each building rows as it goes, equal one thread's."""
    text = b"def f(a, b):\n    if a:\n        x = (a +\n  b)\n        return x\n    return b\n"
    toks = encode(vocab, text)
    eager = compile_grammar(PY, vocab, cache=False, progress=False)
    want = []
    m = Matcher(eager)
    for t in toks:
        want.append(m.allowed_mask())
        m.advance(t)
    lazy = compile_grammar(PY, vocab, cache=False, progress=False, lazy=True)
    errors: list[str] = []

    def worker(k: int) -> None:
        m = Matcher(lazy)
        for i, t in enumerate(toks):
            if not np.array_equal(m.allowed_mask(), want[i]):
                errors.append(f"thread {k} position {i}")
                return
            m.advance(t)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_lazy_file_is_cached_and_rebuilt_when_corrupt(vocab, tmp_path):
    prof = CompileProfile()
    nice = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
    g1 = compile_grammar(JSON, vocab, cache=tmp_path, progress=False, lazy=True, profile=prof)
    wait_for_cache_writes()  # a lazy file is written beside the first mask, on a low-priority thread
    if nice is not None:  # only the writing thread was lowered, not the caller's
        assert os.getpriority(os.PRIO_PROCESS, 0) == nice
    assert [p.name for p in prof.phases] == ["lark load", "terminal DFAs", "parse tables", "lexer configurations",
                                             "flat arrays"]
    files = list(tmp_path.glob("lazy-*.bin"))
    assert len(files) == 1 and not list(tmp_path.glob("flat-*.bin"))
    prof = CompileProfile()
    g2 = compile_grammar(JSON, vocab, cache=tmp_path, progress=False, lazy=True, profile=prof)
    assert [p.name for p in prof.phases] == ["load flat arrays"]
    assert np.array_equal(Matcher(g1).allowed_mask(), Matcher(g2).allowed_mask())
    data = bytearray(files[0].read_bytes())
    data[-100] ^= 0xFF
    files[0].write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g3 = compile_grammar(JSON, vocab, cache=tmp_path, progress=False, lazy=True)
    assert any("checksum" in str(w.message) for w in caught)
    assert np.array_equal(Matcher(g3).allowed_mask(), Matcher(g1).allowed_mask())


def test_real_tokenizer_json_lazy_equals_eager():
    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    eager = compile_grammar(JSON, vocab, cache=False, progress=False)
    lazy = compile_grammar(JSON, vocab, cache=False, progress=False, lazy=True)
    assert "lazy=True" in repr(lazy)
    n = 0
    for seed in range(6):
        for me, ml in lockstep_walk(eager, lazy, seed, steps=60):
            assert np.array_equal(me.allowed_mask(), ml.allowed_mask())
            n += 1
    assert n > 100


def test_vocab_trie_must_match_the_vocabulary(vocab):
    lazy = compile_grammar(JSON, vocab, cache=False, progress=False, lazy=True)
    other = compile_grammar(JSON, Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2"), cache=False,
                            progress=False, lazy=True)
    core = lazy.native_module
    with pytest.raises(ValueError, match="vocabulary trie is for"):
        core.Grammar(lazy.flat.arrays, lazy.flat.meta, other.vocab_trie())
    assert lazy.vocab_trie().n_tokens > 0


COUNTED = {"type": "object", "properties": {
    "short": {"type": "string", "maxLength": 12},
    "long": {"type": "string", "minLength": 3, "maxLength": 70},
    "code": {"type": "string", "pattern": "^[a-z]{2,40}$"},
    "n": {"type": "integer", "minimum": 0, "maximum": 999}}, "required": ["short", "long"]}


def test_counted_strings_share_walks_and_masks_equal_eager():
    """Inside a bounded string the lazy store walks a position's tokens as an earlier position's where no
    token is long enough to tell them apart (LazyStore::canonical), and takes whole the trie subtrees whose
    plain characters fit what is left (LazyStore::plain_whole); its masks equal the eager store's, which
    walks every token itself: near each bound, at it, and past long tokens."""
    from tokenizers import Tokenizer

    from cad_outlines.engine.compile import compile_json_schema

    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    tok = Tokenizer.from_file(str(SMALL / "tokenizers" / "gpt2" / "tokenizer.json"))
    eager = compile_json_schema(COUNTED, vocab, cache=False, lazy=False, progress=False)
    lazy = compile_json_schema(COUNTED, vocab, cache=False, lazy=True, progress=False)
    texts = ['{"short": "abcdefghijkl", "long": "' + "x" * 70 + '", "code": "ab", "n": 12}',
             '{"short": "", "long": "' + " " * 69 + '", "code": "' + "q" * 40 + '"}',
             '{"short": "hello world!", "long": "the quick brown fox jumps over the lazy dog, again and again and"}',
             '{"short": "a", "long": "' + "-" * 30 + "=" * 30 + '", "n": 999}']
    n = 0
    for text in texts:
        me, ml = Matcher(eager), Matcher(lazy)
        for t in tok.encode(text, add_special_tokens=False).ids:
            assert np.array_equal(me.allowed_mask(), ml.allowed_mask()), f"at {n}: {text!r}"
            me.advance(t)  # raises if rejected
            ml.advance(t)
            n += 1
        assert me.is_accepting() and ml.is_accepting()
    for seed in range(8):
        for me, ml in lockstep_walk(eager, lazy, seed, steps=90):
            assert np.array_equal(me.allowed_mask(), ml.allowed_mask()), f"seed {seed}"
            n += 1
    assert n > 500
    assert lazy.native.shared_hypotheses > 0  # the walks were shared, not all walked again
    assert lazy.native.plain_takes > 0  # and subtrees of plain characters that fit were taken whole
    # a whole walk after those builds numbers and builds as a fresh one (their walks end in stand-in states)
    from cad_outlines.engine.compile import _SCHEMAS

    _SCHEMAS.clear()
    fresh = compile_json_schema(COUNTED, vocab, cache=False, lazy=True, progress=False)
    assert fresh is not lazy
    a, b = lazy.native.explore(lambda *_: None), fresh.native.explore(lambda *_: None)
    for name in ("numbered", "visited", "same_as", "row_off", "labels", "row_ent"):
        assert np.array_equal(a[name], b[name]), name


def test_atoms_beside_whole_classes_lazy_equals_eager():
    """A schema whose checks need string and number atoms (one competing group each) beside whole classes
    (each lexed alone): lazy masks equal eager ones along random walks."""
    from cad_outlines.engine.compile import compile_json_schema
    from tests.engine.store.test_schema_lexer import SCHEMAS

    vocab = Vocabulary.from_tokenizer(SMALL / "tokenizers" / "gpt2")
    schema = SCHEMAS[3]
    eager = compile_json_schema(schema, vocab, cache=False, lazy=False, progress=False)
    lazy = compile_json_schema(schema, vocab, cache=False, lazy=True, progress=False)
    assert len(set(eager.flat.meta["label_names"])) > 10
    n = 0
    for seed in range(6):
        for me, ml in lockstep_walk(eager, lazy, seed, steps=60):
            assert np.array_equal(me.allowed_mask(), ml.allowed_mask()), f"seed {seed}"
            n += 1
    assert n > 200
