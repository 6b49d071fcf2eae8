"""The eager mask store, built by the native core: the lazy store's builder
(``_native/src/lazy_store.cpp``) run to completion over every lexer configuration reachable
by whole tokens, its rows taken one by one (``Grammar.explore``) as a :class:`.MaskStore`.

One builder makes both stores: a lazy grammar builds a configuration's rows on first use, an
eager one builds them all here, then streamlines them (:mod:`.streamline`) and flattens them
(:func:`.flat_grammar.flatten`). Configurations and token sets are numbered as the Python
builder numbered them (``engine/reference/store_builder.py``, the test oracle): breadth first
from the initial configuration, configurations in the order their walks first met them, sets
in the order rows first use them, so the flat files are those of that builder byte for byte.

The lexer's byte automaton (:class:`LexerGraph`) is the native one too; streamlining reads its
edges and entered labels from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...limits import check_deadline, check_limit
from .flat_grammar import flatten_lazy, spec_automaton_arrays, vocab_trie
from .lexer import BOUNDARY, Config, ConfigTable, Lexer
from .mask_store import MaskStore, Row
from .timings import phase_clock

if TYPE_CHECKING:
    from ..compiled_grammar import CompiledGrammar

__all__ = ["LexerGraph", "lexer_graph", "build_mask_store"]


@dataclass
class LexerGraph:
    """The lexer's configurations as the native byte automaton (``_native/src/byte_automaton.cpp``):
    every configuration reachable from the initial one byte by byte is a state (state 0 the
    initial one); `arrays` holds the ``l_*``, ``a_*``, ``c_*`` and ``e_*`` arrays of
    :func:`~.flat_grammar.spec_automaton_arrays`, `meta` the lexer's meta."""

    arrays: dict[str, np.ndarray]
    meta: dict
    configs: list[Config]  # per state

    @property
    def n_states(self) -> int:
        return len(self.configs)

    def state_of(self) -> dict[Config, int]:
        """Each configuration's state."""
        return {c: i for i, c in enumerate(self.configs)}

    def entered_sets(self) -> list[tuple[int, ...]]:
        """The entered-label sets by ``e_off`` id (:meth:`.Lexer.entered`'s form)."""
        off, labels = self.arrays["e_off"].tolist(), self.arrays["e_labels"].tolist()
        return [tuple(labels[off[k] : off[k + 1]]) for k in range(len(off) - 1)]

    def entered(self) -> dict[Config, tuple[int, ...] | None]:
        """:meth:`.Lexer.entered` of every state at once."""
        sets = self.entered_sets()
        return {c: None if e < 0 else sets[e] for c, e in zip(self.configs, self.arrays["c_ent"].tolist())}

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge as (source state, next state, label: -1 for none or an ignored one)."""
        ptr = self.arrays["a_ptr"]
        n = self.n_states
        src = np.repeat(np.arange(n), np.diff(ptr).reshape(n, -1).sum(axis=1))  # per (state, byte class)
        return src, self.arrays["a_nxt"].astype(np.int64), self.arrays["a_lab"].astype(np.int64)


def _configs_of(arrays: dict[str, np.ndarray]) -> list[Config]:
    """The byte automaton's states as :class:`Config` (local automaton states, (terminal,
    state) constraint runs)."""
    off = arrays["l_auto_off"].astype(np.int64)
    owner, state = arrays["c_owner"].tolist(), arrays["c_state"].tolist()
    cons, cons_off = arrays["c_cons"], arrays["c_cons_off"].tolist()
    owner_of = np.searchsorted(off, cons, side="right") - 1  # the terminal automaton holding each global state
    term, local = owner_of.tolist(), (cons - off[owner_of]).tolist()
    offs = off.tolist()
    out = []
    for q in range(len(owner)):
        o = owner[q]
        runs = tuple(zip(term[cons_off[q] : cons_off[q + 1]], local[cons_off[q] : cons_off[q + 1]]))
        out.append(Config(o, 0 if o == BOUNDARY else state[q] - offs[o], runs))
    return out


def lexer_graph(lexer: Lexer) -> LexerGraph:
    """The lexer's :class:`LexerGraph`, built once per lexer (it depends on the spec only)."""
    got = getattr(lexer, "_native_graph", None)
    if got is None:
        arrays, meta = spec_automaton_arrays(lexer.spec)
        got = lexer._native_graph = LexerGraph(arrays, meta, _configs_of(arrays))
    return got


def build_mask_store(g: CompiledGrammar, progress: Callable[[int, int], None] | None = None,
                     timings: dict | None = None) -> MaskStore:
    """Every configuration reachable by whole tokens and its rows, built by the native core.

    `g` holds the vocabulary, lexer (its configuration table is replaced by the store's, the
    initial configuration 0, its entered labels primed), parse tables and indenter; no store.
    `progress(done, total)` counts configurations against the byte automaton's states (a bound
    known before the walk). Honours ``max_lexer_configs``, ``max_store_rows`` and the compile's
    deadline (:mod:`cad_outlines.limits`). `timings`, if given, gets [wall, CPU] seconds of
    "lexer configurations" (the byte automaton), "token-level index" (the native walks and rows)
    and "store rows" (the :class:`MaskStore` made of them)."""
    lexer, V = g.lexer, g.vocab_size
    with phase_clock(timings, "lexer configurations"):
        graph = lexer_graph(lexer)
        total = graph.n_states
        check_limit("max_lexer_configs", total, "lexer (byte automaton states)")
        arrays, meta = dict(graph.arrays), dict(graph.meta)
        meta.update(lazy=True, vocab_size=V, n_words=(V + 31) // 32, n_rows=None, n_configs=total)
        flat = flatten_lazy(g, (arrays, meta))
        native = _native_grammar(g, flat)

    def each(done: int, rows: int) -> None:
        check_deadline("the mask store")
        check_limit("max_store_rows", rows, "mask store")
        if progress is not None:
            progress(done, total)

    with phase_clock(timings, "token-level index"):
        got = native.explore(each)
    del native, flat  # the native store's own copy of the rows and sets (memory: `got` holds what is kept)
    with phase_clock(timings, "store rows"):
        store = _mask_store(got, graph, V)
        table = ConfigTable()
        for c in store.configs:
            table.id(c)
        lexer.use_table(table)
        lexer.prime_entered(graph.entered())
    return store


def _native_grammar(g: CompiledGrammar, flat):
    """The native grammar of a lazy flat grammar (its vocabulary trie shared)."""
    from ..._native import core

    return core().Grammar(flat.arrays, flat.meta, vocab_trie(g.vocab.content_hash, flat))


def _mask_store(got: dict[str, np.ndarray], graph: LexerGraph, V: int) -> MaskStore:
    """The :class:`MaskStore` of ``Grammar.explore``'s arrays: configurations numbered as
    explored, sets renumbered in the order rows first use them (both as the Python builder
    did)."""
    numbered, visited = got["numbered"].tolist(), got["visited"].tolist()
    id_of = {s: q for q, s in enumerate(numbered)}
    entered = graph.entered_sets()
    row_off, label_off = got["row_off"].tolist(), got["label_off"].tolist()
    labels, row_ent, row_set = got["labels"].tolist(), got["row_ent"].tolist(), got["row_set"]
    # the native set ids in the order rows first use them -> 0, 1, ...
    firsts = np.unique(row_set, return_index=True)
    used = firsts[0][np.argsort(firsts[1], kind="stable")]
    new_id = np.full(len(got["s_kind"]), -1, dtype=np.int64)
    new_id[used] = np.arange(len(used))
    sids = new_id[row_set].tolist()
    same_as = got["same_as"].tolist()
    rows: list[list[Row]] = [[] for _ in numbered]
    for v, s in enumerate(visited):
        if same_as[v] >= 0:  # the same rows as an earlier configuration: one list (MaskStore.shared)
            rows[id_of[s]] = rows[id_of[visited[same_as[v]]]]
            continue
        rows[id_of[s]] = [(tuple(labels[label_off[r] : label_off[r + 1]]), entered[row_ent[r]], sids[r])
                          for r in range(row_off[v], row_off[v + 1])]
    set_ids, negated = _sets(got, used.tolist(), V)
    configs = [graph.configs[s] for s in numbered]
    return MaskStore(V, configs, rows, set_ids, negated).shared()


def _sets(got: dict[str, np.ndarray], order: list[int], V: int) -> tuple[list[np.ndarray], list[bool]]:
    """The native token sets `order` as the store keeps them: sorted ids, or the ids lacking
    when a set holds more than half the vocabulary."""
    kind, off, size = got["s_kind"].tolist(), got["s_off"].tolist(), got["s_len"].tolist()
    ids_all, words = got["s_ids"], got["s_words"]
    n_words = (V + 31) // 32
    out: list[np.ndarray] = []
    negated: list[bool] = []
    for k in order:
        neg = size[k] * 2 > V
        if kind[k] == 0 and not neg:
            out.append(np.array(ids_all[off[k] : off[k] + size[k]], dtype=np.int32))
        else:
            if kind[k] == 0:
                mask = np.zeros(V, dtype=bool)
                mask[ids_all[off[k] : off[k] + size[k]]] = True
            else:
                bits = np.unpackbits(words[off[k] : off[k] + n_words].view(np.uint8), bitorder="little")
                mask = bits[:V].astype(bool)
            out.append(np.flatnonzero(~mask if neg else mask).astype(np.int32))
        negated.append(neg)
    return out, negated
