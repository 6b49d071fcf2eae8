"""A configuration's mask-store rows as a trie over their emitted labels: the reference matcher's walk
(the native core builds its own from the flat arrays)."""

from __future__ import annotations

import weakref

from ..compiled_grammar import CompiledGrammar

__all__ = ["RowTrie", "row_trie"]


class RowTrie:
    """Rows sharing emitted-label prefixes share a path; `rows` holds (entered, set id)
    of the rows whose emitted labels end here."""

    __slots__ = ("children", "rows")

    def __init__(self) -> None:
        self.children: dict[int, RowTrie] = {}
        self.rows: list[tuple[tuple[int, ...], int]] = []


_TRIES: weakref.WeakKeyDictionary[CompiledGrammar, dict[int, RowTrie]] = weakref.WeakKeyDictionary()


def row_trie(grammar: CompiledGrammar, cfg_id: int) -> RowTrie:
    """The mask-store rows of configuration `cfg_id` of `grammar` (its Python store) as a trie, built once."""
    tries = _TRIES.setdefault(grammar, {})
    trie = tries.get(cfg_id)
    if trie is None:
        trie = tries[cfg_id] = RowTrie()
        for emitted, entered, sid in grammar.store.rows[cfg_id]:
            node = trie
            for elem in emitted:
                node = node.children.setdefault(elem, RowTrie())
            node.rows.append((entered, sid))
    return trie
