"""A grammar compiled for one vocabulary: lexer, mask store and parse tables together."""

from __future__ import annotations

import bisect
import functools

import numpy as np

from ..errors import CadOutlinesError
from ..limits import DEFAULT_LIMITS, Limits
from .store.lexer import Lexer
from .store.mask_store import MaskStore
from .frontend.parse_tables import IndentTracker, ParseTables
from .vocabulary import Vocabulary

__all__ = ["CompiledGrammar", "ObjectsNotLoadedError"]


class ObjectsNotLoadedError(CadOutlinesError, AttributeError):
    """A Python object of a compiled grammar (``store``, ``lexer``, ...) read before :meth:`CompiledGrammar.load_objects`."""


class CompiledGrammar:
    """Everything a :class:`~cad_outlines.engine.matcher.Matcher` needs; immutable once
    built and shared by all matchers of the grammar.

    The runtime needs only :attr:`native` (over the flat arrays, memory-mapped from the
    cache). The Python objects (``lexer``, ``store``, ``tables``, ``indenter``) serve the
    build, the analyses and the reference matcher. A grammar loaded from its cache file holds
    only the flat arrays: reading one of those objects then raises :class:`ObjectsNotLoadedError`,
    and :meth:`load_objects` builds them (an eager compile, or the cached store), only when
    called: reading a compiled grammar never recompiles it.

    :attr:`limits` are the :class:`~cad_outlines.limits.Limits` it was compiled (or loaded) under; its
    matchers take their decode-time limits from them unless given their own.
    """

    limits: Limits = DEFAULT_LIMITS

    def __init__(self, vocab: Vocabulary, lexer: Lexer | None = None, store: MaskStore | None = None,
                 tables: ParseTables | None = None, indenter: IndentTracker | None = None, grammar_hash: str = "",
                 streamlined: bool = False, *, flat=None, reference_loader=None):
        self.vocab = vocab
        self.grammar_hash = grammar_hash
        self.streamlined = streamlined  # the store was rewritten by grammar analysis
        self._objects = (lexer, store, tables, indenter) if lexer is not None else None
        self._reference_loader = reference_loader
        if self._objects is None and (flat is None or reference_loader is None):
            raise ValueError("a CompiledGrammar needs its Python objects, or flat arrays and a loader for them")
        self.vocab_size: int = self.vocab.size
        self.eos_token_ids: tuple[int, ...] = tuple(self.vocab.eos_token_ids)
        self._sorted_bytes: list[bytes] | None = None
        self._sorted_order = np.zeros(0, dtype=np.int32)
        self._flat = flat
        self._native = None

    # -- the Python objects (build, analyses, reference matcher) -------------------------
    @property
    def has_objects(self) -> bool:
        """The Python objects are here (built by this compile, or by :meth:`load_objects`)."""
        return self._objects is not None

    def load_objects(self) -> CompiledGrammar:
        """Build the Python objects of a grammar loaded from its cache file (an eager compile of the
        grammar, or its cached ``.npz`` store); returns self. Explicit on purpose: nothing else builds them."""
        if self._objects is None:
            self._objects = self._reference_loader()
        return self

    def _reference(self):
        if self._objects is None:
            raise ObjectsNotLoadedError(
                "this CompiledGrammar was loaded from its cache file and holds only the flat arrays the runtime "
                "uses; call .load_objects() to build its Python objects (lexer, store, tables: an eager compile)")
        return self._objects

    @property
    def lexer(self) -> Lexer:
        return self._reference()[0]

    @property
    def store(self) -> MaskStore:
        return self._reference()[1]

    @property
    def tables(self) -> ParseTables:
        return self._reference()[2]

    @property
    def indenter(self) -> IndentTracker | None:
        return self._reference()[3]

    @functools.cached_property
    def label_names(self) -> list[str]:
        if self._objects is None:
            return list(self.flat.meta["label_names"])
        return list(self.lexer.spec.labels)

    @functools.cached_property
    def never_allowed(self) -> np.ndarray:
        return np.array(sorted(self.vocab.special_ids), dtype=np.int64)

    @functools.cached_property
    def first_bytes(self) -> np.ndarray:
        """First byte of every token (-1: special or empty), to rule out forced bytes fast."""
        return np.array([b[0] if b and i not in self.vocab.special_ids else -1
                         for i, b in enumerate(self.vocab.token_bytes)], dtype=np.int16)

    def __repr__(self) -> str:  # one short line, from the flat arrays (no Python objects are loaded for it)
        meta = self.flat.meta
        return (f"CompiledGrammar(start={meta.get('start')!r}, terminals={meta.get('n_labels')}, "
                f"lexer_configs={meta.get('n_configs')}, vocab={self.vocab_size}, streamlined={self.streamlined}, "
                f"{'lazy=True, ' if meta.get('lazy') else ''}"
                f"indenter={bool(meta.get('has_indenter'))}, grammar_hash={self.grammar_hash[:12]!r})")

    # -- the native runtime ------------------------------------------------------------
    @property
    def flat(self):
        """The grammar as flat arrays (:mod:`.flat_grammar`), built on first use."""
        if self._flat is None:
            from .store.flat_grammar import flatten

            self._flat = flatten(self)
        return self._flat

    @property
    def native_module(self):
        from .._native import core

        return core()

    @property
    def native(self):
        """The native core's grammar object over :attr:`flat` (shared by all matchers)."""
        if self._native is None:
            flat = self.flat
            trie = self.vocab_trie() if flat.meta.get("lazy") else None
            self._native = self.native_module.Grammar(flat.arrays, flat.meta, trie)
        return self._native

    @property
    def lazy(self) -> bool:
        """The store is built by the native core on first use (``compile_grammar(..., lazy=True)``)."""
        return bool(self.flat.meta.get("lazy"))

    def vocab_trie(self):
        """The native byte trie of this vocabulary, built once per process and shared by
        every lazy grammar of the vocabulary (keyed by its content hash)."""
        from .store.flat_grammar import vocab_trie

        return vocab_trie(self.vocab.content_hash, self.flat)

    @functools.cached_property
    def byte_token_ids(self) -> np.ndarray:
        """For each byte value, a non-special token whose bytes are exactly that byte (-1: none)."""
        out = np.full(256, -1, dtype=np.int64)
        for i, b in enumerate(self.vocab.token_bytes):
            if len(b) == 1 and out[b[0]] < 0 and i not in self.vocab.special_ids:
                out[b[0]] = i
        return out

    def token_bytes(self, token: int) -> bytes:
        if 0 <= token < self.vocab_size and token not in self.vocab.special_ids:
            return self.vocab.token_bytes[token]
        return b""

    def tokens_extending(self, prefix: bytes) -> np.ndarray:
        """Ids of tokens whose bytes start with `prefix` and are longer."""
        if self._sorted_bytes is None:
            order = self.vocab.sorted_ids()
            self._sorted_order = order
            self._sorted_bytes = [self.vocab.token_bytes[i] for i in order]
        lo = bisect.bisect_right(self._sorted_bytes, prefix)
        stem = prefix.rstrip(b"\xff")
        hi = bisect.bisect_left(self._sorted_bytes, stem[:-1] + bytes([stem[-1] + 1])) if stem else len(self._sorted_bytes)
        return self._sorted_order[lo:hi]
