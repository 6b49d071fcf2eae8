"""The compiled grammar as flat arrays: what the native core runs on.

Everything the decode-time path needs (parse tables, terminal automata, lexer
configurations, the mask store as a row trie per configuration, token sets and token
bytes) becomes plain numpy arrays of ints, saved as ONE file and memory-mapped on load,
so no per-row Python object stays alive and loads cost a page-in, not a parse.

Layout (all little-endian; "CSR" = an ``*_off`` array of n+1 offsets into a data array):

- parser ``p_*``: ``p_action[state * n_terms + term]`` is 0 (error), ``k + 1`` (shift to
  state k) or ``-(r + 1)`` (reduce by rule r); ``p_goto[state * n_nonterms + lhs]``
  (-1: none); ``p_rule_lhs``/``p_rule_len``; ``p_open``/``p_close`` flag the indenter's
  bracket terminals; ``p_rule_guard`` (JSON Schema objects only: :class:`ObjectGuards` codes
  per rule, ``p_guard_off``/``p_guard_mask`` its close checks' masks (CSR), with
  ``meta["guard_open"/"guard_close"]`` terminal ids); ``label_term[label]``
  maps a lexer label to its parser terminal (-1: the parser never accepts it).
- lexer ``l_*``: every terminal automaton's states renumbered into one global range
  (``l_auto_off``), ``l_trans[g * 256 + b]`` global; ``l_label``, ``l_live``, ``l_block``
  (g * 256 + b), ``l_blocked``, ``l_pending``, ``l_shadow`` (global), ``l_guard[g]`` (the
  start state of the lookahead guard run a lexeme ending in g adds, or -1); ``l_first``
  (n_terminals x 256, global), ``l_starters`` (CSR by first byte), competitors
  ``l_comp`` (CSR by owner * 256 + byte; ``l_comp_none`` marks lark picking an earlier
  terminal at once).
- configurations ``c_*``: owner (-1 = between lexemes), state (global; 0 between
  lexemes), constraint runs ``c_cons`` (CSR, sorted global states), ``c_entered`` (CSR
  of the labels the lexeme in progress can still end as, -1 = ignored;
  ``c_entered_valid`` 0 = it cannot end), ``c_final`` (how the text may end here: -2
  no, -1 nothing pending, -3 an ignored lexeme ends, else its label).
- row trie ``t_*``: per configuration a root node (``t_root``) and one merged set of the
  rows that need no parser question (``t_uncond``, -1 if none); configurations with the
  same rows share one trie (``meta["n_rows"]`` counts rows per configuration, what masks
  read; ``meta["n_stored_rows"]`` those stored); nodes have edges
  (``t_edge_off``/``t_edge_elem``/``t_edge_child``, elements as in the store: a label,
  or a NEWLINE with its indentation packed in) and rows (``t_row_off``/``t_row_ent``/
  ``t_row_set``); entered-label sets are CSR ``e_off``/``e_labels``.
- token sets ``s_*``: kind 0 = sorted ids (``s_ids[s_off : s_off + s_len]``), kind 1 =
  a bitset of ``n_words`` uint32 words at ``s_words[s_off :]`` (dense sets, and every
  complemented set).
- lazy grammars (``meta["lazy"]``, ``compile_grammar(..., lazy=True)``) have no ``t_*``
  and ``s_*`` arrays: the native core builds a configuration's rows on first use from
  the lexer's byte automaton ``a_*`` (``a_ptr`` CSR by state * n_classes + ``a_class[byte]``:
  bytes no terminal automaton tells apart share a class; per edge ``a_nxt``, ``a_lab``,
  ``a_kind``, ``a_ends_nl``; per state ``a_in_nl``), and
  ``c_ent`` (each configuration's entered-label set as an ``e_off`` id, -1: it cannot
  end). Its configurations are all the byte automaton's states.
- vocabulary ``v_*``: ``v_allowed`` bitset of ids that may ever be allowed (not
  special), ``v_eos``, token bytes (CSR ``v_bytes_off``/``v_bytes``).
"""

from __future__ import annotations

import json
import zlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...errors import CacheFileError
from ...limits import active_limits, check_limit
from .lexer import BOUNDARY, INDENT_BASE, LexerSpec
from ..frontend.parse_tables import END

if TYPE_CHECKING:
    from ..compiled_grammar import CompiledGrammar

__all__ = ["FlatGrammar", "flatten", "flatten_lazy", "lazy_lexer_arrays", "spec_automaton_arrays",
           "dfa_automaton_arrays", "lazy_flat", "vocab_trie",
           "FLAT_MAGIC", "FlatFileError"]

FLAT_MAGIC = b"CADFLAT1"
_ALIGN = 64


FlatFileError = CacheFileError  # the name before 0.2


class FlatGrammar:
    """Named flat arrays plus a small JSON header of scalars and names."""

    def __init__(self, arrays: dict[str, np.ndarray], meta: dict):
        self.arrays = arrays
        self.meta = meta

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    # -- one file, memory-mapped --------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write atomically: magic, header length, JSON header, then each array aligned.
        The header carries a crc32 of the array bytes, checked on load."""
        path = Path(path)
        index, offset, pieces = [], 0, []  # pieces: (zero bytes before, array bytes)
        for name, arr in self.arrays.items():
            arr = np.ascontiguousarray(arr)
            aligned = -(-offset // _ALIGN) * _ALIGN
            index.append({"name": name, "dtype": arr.dtype.str, "shape": list(arr.shape), "offset": aligned})
            pieces.append((aligned - offset, memoryview(arr.reshape(-1)).cast("B")))
            offset = aligned + arr.nbytes
        # the checksum and the writes go array by array, without a copy of the body: both release
        # the GIL on large buffers, so a save on a thread barely slows the caller
        crc = 0
        for gap, data in pieces:
            crc = zlib.crc32(data, zlib.crc32(bytes(gap), crc))
        header = json.dumps({"meta": self.meta, "arrays": index, "size": offset, "crc32": crc}).encode()
        start = -(-(len(FLAT_MAGIC) + 8 + len(header)) // _ALIGN) * _ALIGN
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
        try:
            with open(tmp, "wb") as f:
                f.write(FLAT_MAGIC + len(header).to_bytes(8, "little") + header)
                f.write(b"\0" * (start - f.tell()))
                for gap, data in pieces:
                    f.write(bytes(gap))
                    f.write(data)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: str | Path, *, verify: bool = True) -> FlatGrammar:
        """Memory-map a saved file; raises :class:`FlatFileError` if it is truncated,
        from another format, or its bytes do not match the checksum (`verify`)."""
        path = Path(path)
        try:
            raw = np.memmap(path, dtype=np.uint8, mode="r")
        except (ValueError, OSError) as e:
            raise FlatFileError(f"{path}: cannot map ({e})") from e
        if len(raw) < len(FLAT_MAGIC) + 8 or bytes(raw[: len(FLAT_MAGIC)]) != FLAT_MAGIC:
            raise FlatFileError(f"{path}: not a flat grammar file of this version")
        n = int.from_bytes(bytes(raw[len(FLAT_MAGIC): len(FLAT_MAGIC) + 8]), "little")
        try:
            header = json.loads(bytes(raw[len(FLAT_MAGIC) + 8: len(FLAT_MAGIC) + 8 + n]))
        except ValueError as e:
            raise FlatFileError(f"{path}: unreadable header ({e})") from e
        start = -(-(len(FLAT_MAGIC) + 8 + n) // _ALIGN) * _ALIGN
        if len(raw) < start + header["size"]:
            raise FlatFileError(f"{path}: truncated ({len(raw)} bytes, expected {start + header['size']})")
        arrays = {}
        for e in header["arrays"]:
            dt = np.dtype(e["dtype"])
            count = int(np.prod(e["shape"], dtype=np.int64))
            lo = start + e["offset"]
            arr = raw[lo: lo + count * dt.itemsize].view(dt).reshape(e["shape"])
            arrays[e["name"]] = arr
        if verify and zlib.crc32(raw[start: start + header["size"]]) != header["crc32"]:
            raise FlatFileError(f"{path}: checksum mismatch (corrupt file)")
        return cls(arrays, header["meta"])


def _csr(chunks, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    offs = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in chunks], out=offs[1:])
    data = np.concatenate([np.asarray(c, dtype=dtype) for c in chunks]) if chunks and offs[-1] else np.zeros(0, dtype)
    return offs.astype(np.int64), data.astype(dtype)


def _cat(arrays: list, dtype, width: int | None = None) -> np.ndarray:
    """np.concatenate of `arrays` as `dtype`; none (a grammar without terminals): an empty array of rows of
    `width` (if given)."""
    if arrays:
        return np.concatenate(arrays).astype(dtype)
    return np.zeros((0, width) if width else 0, dtype=dtype)


def _parser_arrays(tables, ind, label_names: list[str], out: dict, meta: dict) -> None:
    """The ``p_*`` arrays and ``label_term`` of parse tables, an indenter (or None) and the lexer's labels."""
    arr = tables.arrays()
    terms = set(tables.terminals) | {END}
    terms |= set(label_names)
    if ind is not None:
        terms |= {ind.nl_type, ind.indent_type, ind.dedent_type} | set(ind.open_types) | set(ind.close_types)
    term_names = sorted(terms)
    term_id = {t: i for i, t in enumerate(term_names)}
    nt_syms = np.unique(np.concatenate([arr.rule_lhs, arr.gotos[:, 1]]))
    nonterms = sorted({arr.names[s] for s in nt_syms.tolist()})
    nt_id = {n: i for i, n in enumerate(nonterms)}
    term_col = np.array([term_id.get(n, -1) for n in arr.names], dtype=np.int64)  # symbol id -> column
    nt_col = np.array([nt_id.get(n, -1) for n in arr.names], dtype=np.int64)
    n_states = arr.n_states
    action = np.zeros((n_states, len(term_names)), dtype=np.int32)
    goto = np.full((n_states, max(1, len(nonterms))), -1, dtype=np.int32)
    sh, red, gt = arr.shifts, arr.reduces, arr.gotos
    action[sh[:, 0], term_col[sh[:, 1]]] = sh[:, 2] + 1
    action[red[:, 0], term_col[red[:, 1]]] = -(red[:, 2] + 1)
    goto[gt[:, 0], nt_col[gt[:, 1]]] = gt[:, 2]
    out["p_action"] = action.reshape(-1)
    out["p_goto"] = goto.reshape(-1)
    out["p_rule_lhs"] = nt_col[arr.rule_lhs].astype(np.int32)
    out["p_rule_len"] = np.array([n for _, n in tables.rules], dtype=np.int32)
    out["p_open"] = np.array([ind is not None and t in ind.open_types for t in term_names], dtype=np.uint8)
    out["p_close"] = np.array([ind is not None and t in ind.close_types for t in term_names], dtype=np.uint8)
    out["label_term"] = np.array([term_id.get(n, -1) if n in tables.terminals or (ind and n == ind.nl_type) else -1
                                  for n in label_names], dtype=np.int32)
    meta.update(n_states=n_states, n_terms=len(term_names), n_nonterms=max(1, len(nonterms)),
                start_state=tables.start_state, end_state=tables.end_state, end_term=term_id[END],
                has_indenter=ind is not None,
                nl_term=term_id[ind.nl_type] if ind else -1, indent_term=term_id[ind.indent_type] if ind else -1,
                dedent_term=term_id[ind.dedent_type] if ind else -1,
                term_names=term_names, start=tables.start)
    gd = tables.guards
    if gd is not None:  # JSON Schema objects' required names checked beside the tables (ObjectGuards)
        out["p_rule_guard"] = np.array([gd.codes.get(lhs, 0) for lhs, _ in tables.rules], dtype=np.int32)
        out["p_guard_off"] = np.cumsum([0] + [len(c) for c in gd.checks], dtype=np.int32)
        out["p_guard_mask"] = np.array([m for c in gd.checks for m in c], dtype=np.int32)
        meta.update(guard_open=term_id[gd.open], guard_close=term_id[gd.close])


def _lexer_arrays(g: CompiledGrammar, out: dict, meta: dict) -> list[int]:
    return _spec_arrays(g.lexer.spec, out, meta)


def _spec_arrays(spec: LexerSpec, out: dict, meta: dict) -> list[int]:
    autos = spec.automata
    sizes = [a.trans.shape[0] for a in autos]
    off = np.zeros(len(autos) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    out["l_auto_off"] = off.astype(np.int32)
    state_off = np.repeat(out["l_auto_off"][:-1], sizes)  # per global state: its automaton's first
    out["l_trans"] = (_cat([a.trans for a in autos], np.int64, 256) + state_off[:, None]).astype(np.int32).reshape(-1)
    out["l_label"] = _cat([a.label for a in autos], np.int32)
    out["l_live"] = _cat([a.live for a in autos], np.uint8)
    out["l_block"] = _cat([a.block for a in autos], np.uint8, 256).reshape(-1)
    out["l_blocked"] = _cat([a.blocked for a in autos], np.uint8)
    out["l_pending"] = _cat([a.pending for a in autos], np.uint8)
    out["l_shadow"] = (_cat([a.shadow for a in autos], np.int64) + state_off).astype(np.int32)
    out["l_dead"] = np.array([off[i] + a.dead for i, a in enumerate(autos)], dtype=np.int32)
    guard = np.full(int(off[-1]), -1, dtype=np.int32)
    for (i, s), gidx in spec.guard_of.items():
        guard[off[i] + s] = off[gidx]
    out["l_guard"] = guard
    k = spec.n_terminals
    out["l_first"] = (spec.first + off[:k, None]).astype(np.int32).reshape(-1) if k else np.zeros(0, np.int32)
    # spec.starters as CSR: per byte, the terminals that can start with it
    dead = np.array([a.dead for a in autos[:k]], dtype=np.int32)
    bytes_, starters = np.nonzero((spec.first != dead[:, None]).T)  # byte-major, terminals ascending
    out["l_starters_off"] = np.zeros(257, dtype=np.int64)
    np.cumsum(np.bincount(bytes_, minlength=256), out=out["l_starters_off"][1:])
    out["l_starters"] = starters.astype(np.int32)
    out["l_comp_none"], out["l_comp_off"], out["l_comp"] = spec.competitor_arrays(off)
    out["l_ignored"] = np.array([i in spec.ignored for i in range(len(spec.labels))], dtype=np.uint8)
    meta.update(n_terminals=k, indent_label=-1 if spec.indent_label is None else spec.indent_label,
                indent_owner=-1 if spec.indent_owner is None else spec.indent_owner, tab_len=spec.tab_len,
                n_labels=len(spec.labels), label_names=list(spec.labels))
    return [int(x) for x in off]


def _config_arrays(g: CompiledGrammar, off: list[int], out: dict) -> None:
    lexer = g.lexer
    configs = lexer.table.configs
    owner = np.array([c.owner for c in configs], dtype=np.int32)
    state = np.array([0 if c.owner == BOUNDARY else off[c.owner] + c.state for c in configs], dtype=np.int32)
    out["c_owner"], out["c_state"] = owner, state
    out["c_cons_off"], out["c_cons"] = _csr([sorted(off[j] + u for j, u in c.cons) for c in configs])
    entered = [lexer.entered(q) for q in range(len(configs))]
    out["c_entered_valid"] = np.array([e is not None for e in entered], dtype=np.uint8)
    out["c_entered_off"], out["c_entered"] = _csr([e or () for e in entered])
    final = []
    for q in range(len(configs)):
        f = lexer.final_labels(q)
        final.append(-2 if f is None else -1 if not f else -3 if f[0] is None else f[0])
    out["c_final"] = np.array(final, dtype=np.int32)


def _store_arrays(g: CompiledGrammar, out: dict, meta: dict) -> None:
    store = g.store
    V = g.vocab_size
    n_words = (V + 31) // 32
    meta.update(vocab_size=V, n_words=n_words, n_rows=store.n_rows, n_stored_rows=store.n_stored_rows,
                n_configs=len(store.rows))
    # sets: the store's own, then one merged "needs no parser question" set per config
    set_defs: list[tuple[np.ndarray, bool]] = [(store.set_ids[k], store.set_negated[k]) for k in range(len(store.set_ids))]
    extra: dict[bytes, int] = {}
    ent_index: dict[tuple[int, ...], int] = {}
    ent_chunks: list[tuple[int, ...]] = []

    def ent_id(e: tuple[int, ...]) -> int:
        got = ent_index.get(e)
        if got is None:
            got = ent_index[e] = len(ent_chunks)
            ent_chunks.append(e)
        return got

    roots, uncond = [], []  # per distinct row list (configurations with equal rows share its trie)
    edge_off, edge_elem, edge_child, row_off, row_ent, row_set = [0], [], [], [0], [], []
    lists, list_of = store.row_lists()
    for rows in lists:
        # the trie of this row list, nodes numbered globally in DFS order
        free: list[int] = []
        tree: dict = {}
        for emitted, entered, sid in rows:
            if not emitted and (not entered or any(x < 0 for x in entered)):
                free.append(sid)
                continue
            node = tree
            for elem in emitted:
                node = node.setdefault(elem, {})
            node.setdefault(None, []).append((entered, sid))
        if not free:
            uncond.append(-1)
        elif len(free) == 1:
            uncond.append(free[0])
        else:
            m = np.zeros(V, dtype=bool)
            for sid in free:
                m |= store.set_mask(sid)
            key = np.packbits(m).tobytes()
            if key not in extra:
                neg = int(m.sum()) * 2 > V
                extra[key] = len(set_defs)
                set_defs.append((np.flatnonzero(~m if neg else m).astype(np.int32), neg))
            uncond.append(extra[key])
        # number nodes breadth-first so each node's children are contiguous
        order = [tree]
        k = 0
        base = len(row_off) - 1
        roots.append(base)
        while k < len(order):
            node = order[k]
            k += 1
            for entered, sid in node.get(None, []):
                row_ent.append(ent_id(tuple(entered)))
                row_set.append(sid)
            row_off.append(len(row_ent))
            for elem in sorted(e for e in node if e is not None):
                edge_elem.append(elem)
                edge_child.append(base + len(order))
                order.append(node[elem])
            edge_off.append(len(edge_elem))
    out["t_root"] = np.array(roots, dtype=np.int32)[list_of]
    out["t_uncond"] = np.array(uncond, dtype=np.int32)[list_of]
    out["t_edge_off"] = np.array(edge_off, dtype=np.int32)
    out["t_edge_elem"] = np.array(edge_elem, dtype=np.int32)
    out["t_edge_child"] = np.array(edge_child, dtype=np.int32)
    out["t_row_off"] = np.array(row_off, dtype=np.int32)
    out["t_row_ent"] = np.array(row_ent, dtype=np.int32)
    out["t_row_set"] = np.array(row_set, dtype=np.int32)
    out["e_off"], out["e_labels"] = _csr(ent_chunks)
    out["e_off"] = out["e_off"].astype(np.int32)
    # token sets: sparse ids, or a bitset when dense (or complemented)
    dense_from = max(64, n_words // 2)
    kinds, offs, lens, ids_chunks, words_chunks = [], [], [], [], []
    n_ids = n_dense = 0
    for ids, neg in set_defs:
        if neg or len(ids) > dense_from:
            m = np.zeros(n_words * 32, dtype=bool)
            m[ids] = True
            if neg:
                m = ~m
                m[V:] = False
            kinds.append(1)
            offs.append(n_dense * n_words)
            lens.append(int(m.sum()))
            words_chunks.append(np.packbits(m, bitorder="little").view("<u4"))
            n_dense += 1
        else:
            kinds.append(0)
            offs.append(n_ids)
            lens.append(len(ids))
            ids_chunks.append(np.asarray(ids, dtype=np.int32))
            n_ids += len(ids)
    out["s_kind"] = np.array(kinds, dtype=np.uint8)
    out["s_off"] = np.array(offs, dtype=np.int64)
    out["s_len"] = np.array(lens, dtype=np.int32)
    out["s_ids"] = np.concatenate(ids_chunks) if ids_chunks else np.zeros(0, np.int32)
    out["s_words"] = np.concatenate(words_chunks).astype(np.uint32) if words_chunks else np.zeros(0, np.uint32)


_VOCAB_ARRAYS: dict[tuple, dict[str, np.ndarray]] = {}  # per vocabulary, built once per process


def _vocab_arrays(vocab, out: dict, meta: dict) -> None:
    meta.update(INDENT_BASE=INDENT_BASE)
    key = (vocab.content_hash, vocab.size, tuple(vocab.eos_token_ids))
    got = _VOCAB_ARRAYS.get(key)
    if got is None:
        got = _VOCAB_ARRAYS[key] = {}
        _vocab_arrays_of(vocab, got)
    out.update(got)


def _vocab_arrays_of(vocab, out: dict) -> None:
    V = vocab.size
    n_words = (V + 31) // 32
    allowed = np.zeros(n_words * 32, dtype=bool)
    allowed[:V] = True
    allowed[list(vocab.special_ids)] = False
    out["v_allowed"] = np.packbits(allowed, bitorder="little").view("<u4").astype(np.uint32)
    out["v_eos"] = np.array(tuple(vocab.eos_token_ids), dtype=np.int32)
    tb = [b"" if i in vocab.special_ids else b for i, b in enumerate(vocab.token_bytes)]
    tb += [b""] * (V - len(tb))
    offs = np.zeros(V + 1, dtype=np.int64)
    np.cumsum([len(b) for b in tb], out=offs[1:])
    out["v_bytes_off"] = offs
    out["v_bytes"] = np.frombuffer(b"".join(tb), dtype=np.uint8).copy()
    for a in out.values():
        a.flags.writeable = False  # shared by every grammar of the vocabulary


def lazy_lexer_arrays(g: CompiledGrammar) -> tuple[dict[str, np.ndarray], dict]:
    """The lexer's arrays and meta, plus its byte automaton and every configuration's arrays
    (``c_*``, ``c_ent``, ``e_*``, ``a_*``), built by the native core
    (``_native/src/byte_automaton.cpp``) from the terminal automata alone: `g` needs its
    lexer's spec, not its configuration table."""
    out, meta = spec_automaton_arrays(g.lexer.spec)
    meta.update(lazy=True, vocab_size=g.vocab_size, n_words=(g.vocab_size + 31) // 32, n_rows=None,
                n_configs=len(out["c_owner"]))
    return out, meta


def spec_automaton_arrays(spec: LexerSpec) -> tuple[dict[str, np.ndarray], dict]:
    """A lexer spec's ``l_*`` arrays and meta plus its native byte automaton (``a_*``) and every
    configuration's arrays (``c_*``, ``c_ent``, ``e_*``): what :func:`lazy_lexer_arrays` returns
    before the vocabulary's meta. Stops with ``max_lexer_configs`` when the automaton has more
    states (:mod:`cad_outlines.limits`)."""
    from ..._native import core

    out: dict[str, np.ndarray] = {}
    meta: dict = {}
    _spec_arrays(spec, out, meta)
    out.update(_capped(lambda cap: core().byte_automaton(out, meta, **cap)))
    return out, meta


def _capped(build):
    """`build` (a native byte-automaton builder, given ``max_states`` as keywords) under the active
    ``max_lexer_configs``: more states raise :class:`~cad_outlines.errors.ResourceLimitError`."""
    cap = active_limits().max_lexer_configs
    try:
        return build({} if cap is None else {"max_states": cap})
    except ValueError as e:
        if cap is None:
            raise
        check_limit("max_lexer_configs", cap + 1, f"lexer (byte automaton states; {e})")


def dfa_automaton_arrays(terminals, groups=None) -> tuple[dict[str, np.ndarray], dict]:
    """:func:`spec_automaton_arrays` of :func:`~.lexer.lexer_spec_from_dfas`'s spec for `terminals`
    (``(name, byte DFA)`` pairs in the lexer's order; `groups`: which compete, None: all), built in one
    call to the native core (``_native/src/lexer_tables.cpp``) from the DFAs' arrays: the same arrays,
    without a :class:`~.lexer.LexerSpec`."""
    from ..._native import core

    tables = [(np.ascontiguousarray(dfa.trans, dtype=np.int32), np.ascontiguousarray(dfa.accept).view(np.uint8),
               None if dfa.block is None else np.ascontiguousarray(dfa.block).view(np.uint8))
              for _, dfa in terminals]
    grp = [] if groups is None else [int(x) for x in groups]
    out = _capped(lambda cap: core().lexer_automaton(tables, groups=grp, **cap))
    k = len(terminals)
    meta = dict(n_terminals=k, indent_label=-1, indent_owner=-1, tab_len=8, n_labels=k,
                label_names=[name for name, _ in terminals])
    return out, meta


_VOCAB_TRIES: dict[str, object] = {}  # vocabulary content hash -> native VocabTrie


def vocab_trie(vocab_hash: str, flat: FlatGrammar):
    """The native byte trie of a vocabulary (from a flat grammar's ``v_*`` arrays), built once
    per process and shared by every grammar of the vocabulary (keyed by its content hash)."""
    trie = _VOCAB_TRIES.get(vocab_hash)
    if trie is None:
        from ..._native import core

        trie = _VOCAB_TRIES[vocab_hash] = core().VocabTrie(flat["v_bytes_off"], flat["v_bytes"], flat["v_allowed"])
    return trie


def flatten_lazy(g: CompiledGrammar, lexer: tuple[dict, dict] | None = None) -> FlatGrammar:
    """The flat arrays of a grammar whose store the native core builds on first use:
    everything but the store, plus the lexer's byte automaton (`lexer`: the result of
    :func:`lazy_lexer_arrays`, computed here if not given). `g` holds the lexer spec, parse
    tables and indenter; no store."""
    return lazy_flat(g.tables, g.indenter, g.vocab, lazy_lexer_arrays(g) if lexer is None else lexer)


def lazy_flat(tables, indenter, vocab, lexer: tuple[dict, dict]) -> FlatGrammar:
    """:func:`flatten_lazy` from its parts: parse tables, indenter (or None), vocabulary and the
    lexer's arrays and meta (:func:`spec_automaton_arrays` or :func:`dfa_automaton_arrays`)."""
    out, meta = dict(lexer[0]), dict(lexer[1])
    meta.update(lazy=True, vocab_size=vocab.size, n_words=(vocab.size + 31) // 32, n_rows=None,
                n_configs=len(out["c_owner"]))
    _parser_arrays(tables, indenter, meta["label_names"], out, meta)
    _vocab_arrays(vocab, out, meta)
    return FlatGrammar(out, meta)


def flatten(g: CompiledGrammar) -> FlatGrammar:
    """The flat arrays of a compiled grammar (built from its Python objects)."""
    out: dict[str, np.ndarray] = {}
    meta: dict = {}
    _parser_arrays(g.tables, g.indenter, g.label_names, out, meta)
    off = _lexer_arrays(g, out, meta)
    _config_arrays(g, off, out)
    _store_arrays(g, out, meta)
    _vocab_arrays(g.vocab, out, meta)
    return FlatGrammar(out, meta)
