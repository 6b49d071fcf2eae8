"""A grammar compiled for one vocabulary: lexer, mask store and parse tables together."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from .lexer import Lexer
from .mask_store import MaskStore
from .parser import IndentTracker, ParseTables
from .vocabulary import Vocabulary

__all__ = ["CompiledGrammar", "RowTrie"]


class RowTrie:
    """Rows sharing emitted-label prefixes share a path; `rows` holds (entered, set id)
    of the rows whose emitted labels end here."""

    __slots__ = ("children", "rows")

    def __init__(self) -> None:
        self.children: dict[int, RowTrie] = {}
        self.rows: list[tuple[tuple[int, ...], int]] = []


@dataclass(repr=False)
class CompiledGrammar:
    """Everything a :class:`~cad_outlines.engine.matcher.Matcher` needs; immutable once
    built and shared by all matchers of the grammar."""

    vocab: Vocabulary
    lexer: Lexer
    store: MaskStore
    tables: ParseTables
    indenter: IndentTracker | None = None
    grammar_hash: str = ""
    streamlined: bool = False  # the store was rewritten by grammar analysis

    def __post_init__(self) -> None:
        self.label_names: list[str] = list(self.lexer.spec.labels)
        self.vocab_size: int = self.vocab.size
        self.eos_token_ids: tuple[int, ...] = tuple(self.vocab.eos_token_ids)
        never = np.zeros(self.vocab_size, dtype=bool)
        never[list(self.vocab.special_ids)] = True
        self.never_allowed = np.flatnonzero(never)
        self._sorted_bytes: list[bytes] | None = None
        self._tries: dict[int, RowTrie] = {}
        # first byte of every token (-1: special or empty), to rule out forced bytes fast
        self.first_bytes = np.array([b[0] if b and i not in self.vocab.special_ids else -1
                                     for i, b in enumerate(self.vocab.token_bytes)], dtype=np.int16)
        self._sorted_order = np.zeros(0, dtype=np.int32)

    def __repr__(self) -> str:  # one line: the default dataclass repr printed the whole store (75 KB)
        return (f"CompiledGrammar(start={self.tables.start!r}, terminals={len(self.label_names)}, "
                f"lexer_configs={len(self.store.configs)}, vocab={self.vocab_size}, "
                f"streamlined={self.streamlined}, indenter={self.indenter is not None}, "
                f"grammar_hash={self.grammar_hash[:12]!r})")

    def token_bytes(self, token: int) -> bytes:
        if 0 <= token < self.vocab_size and token not in self.vocab.special_ids:
            return self.vocab.token_bytes[token]
        return b""

    def row_trie(self, cfg_id: int) -> RowTrie:
        """The mask-store rows of a config as a trie over their emitted labels."""
        trie = self._tries.get(cfg_id)
        if trie is None:
            trie = self._tries[cfg_id] = RowTrie()
            for emitted, entered, sid in self.store.rows[cfg_id]:
                node = trie
                for elem in emitted:
                    node = node.children.setdefault(elem, RowTrie())
                node.rows.append((entered, sid))
        return trie

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
