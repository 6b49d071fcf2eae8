"""The Python mask-store builder, kept as the test oracle of the native one
(:mod:`cad_outlines.engine.store.native_store`, ``_native/src/lazy_store.cpp``): tests and the
equivalence studies only; production builds every store natively.

The token-level lexer index: for every lexer configuration and vocabulary token,
the (next configuration, terminal labels emitted) pairs the token can lead to; and
:func:`build_mask_store`, the rows of every reachable configuration from it.

The mask-store streamlining blog's ``nfa_transition`` (docs/references.md), computed without a Python loop over configurations x
vocabulary: the lexer's configurations are first made an explicit automaton over bytes
(:class:`ByteAutomaton`, from :meth:`Lexer.step`); then (hypothesis, token) pairs
advance through its tables as numpy arrays, byte by byte. The walk after a token's first
byte is shared by every configuration that reaches the same hypothesis on that byte
(:class:`_Indexer`), and row token sets are unions of those shared parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ...limits import active_limits, check_deadline, check_limit
from ..store.lexer import BOUNDARY, INDENT_BASE, NO_LINE_BREAK, Config, Lexer, indent_step
from ..store.mask_store import MaskStore, Row, SetInterner
from ..store.timings import phase_clock

__all__ = ["TokenBytes", "ConfigTransitions", "ByteAutomaton", "byte_automaton", "index_config", "explore",
           "build_mask_store"]


@dataclass(frozen=True)
class TokenBytes:
    """Vocabulary bytes as a padded matrix, longest first is not required."""

    ids: np.ndarray  # int32 (m,) token ids that may ever be allowed (non-empty, not special)
    data: np.ndarray  # uint8 (m, max_len)
    lengths: np.ndarray  # int32 (m,)

    @classmethod
    def from_bytes(cls, token_bytes: Iterable[bytes], banned: Iterable[int] = ()) -> TokenBytes:
        tb = list(token_bytes)
        banned = set(banned)
        ids = np.array([i for i, b in enumerate(tb) if b and i not in banned], dtype=np.int32)
        kept = [tb[i] for i in ids.tolist()]
        lengths = np.fromiter(map(len, kept), dtype=np.int32, count=len(kept))
        data = np.zeros((len(ids), int(lengths.max()) if len(ids) else 1), dtype=np.uint8)
        if len(ids):  # one scatter of all the bytes
            flat = np.frombuffer(b"".join(kept), dtype=np.uint8)
            row = np.repeat(np.arange(len(ids)), lengths)
            col = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            data[row, col] = flat
        return cls(ids, data, lengths)


# Results for one starting config: parallel lists of (end config id, emitted labels, rows)
# where rows index into TokenBytes.ids.
ConfigTransitions = list[tuple[int, tuple[int, ...], np.ndarray]]

# Edge kinds of the byte automaton (how a NEWLINE lexeme's indentation moves on the byte)
_PLAIN, _NL_GOES_ON, _NL_STARTS = 0, 1, 2
_LABEL_BITS = 26  # emitted labels (NEWLINE with its indentation packed in) stay below 2**26


class ByteAutomaton:
    """The lexer's configurations as an explicit automaton over bytes: state ids, and for
    (state, byte) the successors from :meth:`Lexer.step` as flat arrays (CSR), so that a
    walk of many hypotheses is integer table look-ups. Every configuration reachable from
    the lexer's initial one by bytes is a state (a superset of those reachable by whole
    tokens; python.lark: 1,543 states, 92k edges).

    Per edge: ``nxt`` (state), ``lab`` (label emitted, -1 for none or an ignored one),
    ``kill_nl`` (the edge ends a NEWLINE: it needs a line break in the lexeme, and
    ``lab`` gets its indentation packed in) and ``kind`` (how the indentation of a
    NEWLINE lexeme moves: :data:`_NL_GOES_ON` continues one, :data:`_NL_STARTS` starts
    one at a boundary)."""

    def __init__(self, lexer: Lexer):
        from ..store.lexer import ConfigTable

        self.lexer = lexer
        spec = lexer.spec
        self.table = ConfigTable()
        start = self.table.id(lexer.table[lexer.initial])
        nl_owner, nl_label, ignored = spec.indent_owner, spec.indent_label, spec.ignored
        ptr = [0]
        nxt: list[int] = []
        raw: list[int] = []
        lab: list[int] = []
        kind: list[int] = []
        ends_nl: list[bool] = []
        todo = [start]
        seen = {start}
        per_state: dict[int, list] = {}
        max_configs = active_limits().max_lexer_configs
        while todo:
            c = todo.pop()
            if not len(per_state) & 63:
                check_deadline("the lexer's byte automaton")
                if max_configs is not None and len(seen) > max_configs:
                    check_limit("max_lexer_configs", len(seen), "lexer (byte automaton states, so far)")
            cfg = self.table[c]
            rows = []
            for b in range(256):
                out = []
                for c2, label in lexer.step(cfg, b):
                    i = self.table.id(c2)
                    if i not in seen:
                        seen.add(i)
                        todo.append(i)
                    if cfg.owner == nl_owner and nl_owner is not None:
                        k = _NL_GOES_ON
                    elif cfg.owner == BOUNDARY and nl_owner is not None and (c2.owner == nl_owner or
                                                                              (label is not None and label == nl_label)):
                        k = _NL_STARTS
                    else:
                        k = _PLAIN
                    is_nl = label is not None and label == nl_label
                    shown = -1 if label is None or label in ignored else label
                    out.append((i, shown, k, is_nl, -1 if label is None else label))
                rows.append(out)
            per_state[c] = rows
        n = len(self.table)
        for c in range(n):
            for out in per_state[c]:
                for i, shown, k, is_nl, r in out:
                    raw.append(r)
                    nxt.append(i)
                    lab.append(shown)
                    kind.append(k)
                    ends_nl.append(is_nl)
                ptr.append(len(nxt))
        self.ptr = np.asarray(ptr, dtype=np.int64)  # (n * 256 + 1,)
        self.nxt = np.asarray(nxt, dtype=np.int32)
        self.lab = np.asarray(lab, dtype=np.int64)  # the label a row records (-1: none, ignored)
        self.raw = np.asarray(raw, dtype=np.int64)  # the label as the lexer gives it (-1: none)
        self.kind = np.asarray(kind, dtype=np.int8)
        self.ends_nl = np.asarray(ends_nl, dtype=bool)
        self.n_states = n
        self.in_nl = np.array([nl_owner is not None and c.owner == nl_owner for c in self.table.configs], dtype=bool)
        self.tab = spec.tab_len

    def viable_labels(self) -> dict[Config, frozenset[int]]:
        """:meth:`Lexer.viable_labels` of every state at once: the labels ending some
        path of lexeme-continuing edges, on an edge to a boundary that can be followed
        by something (or by the end of the text; :meth:`Lexer._can_end`)."""
        lexer, autos = self.lexer, self.lexer.spec.automata
        can_end: dict[int, bool] = {}

        def ends_ok(state: int) -> bool:
            got = can_end.get(state)
            if got is None:
                cons = self.table[state].cons
                got = (not any(autos[j].pending[u] for j, u in cons)
                       or any(lexer._advance_cons(cons, b) is not None for b in range(256)))
                can_end[state] = got
            return got

        n = self.n_states
        src = np.repeat(np.arange(n), np.diff(self.ptr).reshape(n, 256).sum(axis=1))
        direct = [0] * n
        preds: list[list[int]] = [[] for _ in range(n)]
        for e, (c, t, r) in enumerate(zip(src.tolist(), self.nxt.tolist(), self.raw.tolist())):
            if not e & 4095:
                check_deadline("the lexer's viable labels")
            if self.table[c].owner == BOUNDARY:
                continue
            if r >= 0:
                if ends_ok(t):
                    direct[c] |= 1 << r
            else:
                preds[t].append(c)
        bits = list(direct)
        todo = [c for c in range(n) if bits[c]]
        while todo:
            t = todo.pop()
            for c in preds[t]:
                if bits[t] & ~bits[c]:
                    bits[c] |= bits[t]
                    todo.append(c)
        return {self.table[c]: frozenset(i for i in range(bits[c].bit_length()) if bits[c] >> i & 1)
                for c in range(n)}

    def edges(self, state: int, b: int) -> range:
        k = state * 256 + b
        return range(int(self.ptr[k]), int(self.ptr[k + 1]))


def byte_automaton(lexer: Lexer) -> ByteAutomaton:
    """The lexer's :class:`ByteAutomaton`, built once per lexer (it depends on the spec
    only, not on the lexer's config table)."""
    got = getattr(lexer, "_byte_automaton", None)
    if got is None:
        got = ByteAutomaton(lexer)
        lexer._byte_automaton = got
    return got


def _indent_step_vec(acc: np.ndarray, b: np.ndarray, tab: int) -> np.ndarray:
    """:func:`indent_step` on arrays."""
    return np.where(b == 10, 0, np.where(acc < 0, acc, acc + (b == 32) + tab * (b == 9))).astype(np.int32)


class _Indexer:
    """Token-level outcomes from every configuration, computed on the explicit
    :class:`ByteAutomaton`, all hypotheses of a batch advanced together as numpy arrays.

    A token's first byte takes a starting configuration to a few hypotheses (a state,
    plus a NEWLINE lexeme's indentation so far); from there on its outcomes depend only
    on that hypothesis and the token's remaining bytes. So the walk of the tokens
    starting with byte b is done once per (hypothesis, b), a *part*, and shared by
    every configuration that reaches that hypothesis on b (a NAME whose keyword prefix
    just broke off, a boundary whose constraints die on b): on sql.lark x Qwen2.5 the
    walked token-starts drop from 70M to 2.3M. A part's outcomes are groups (end
    configuration, labels emitted after the first byte) -> sorted token rows, each group
    numbered (`part_rows`) so that callers can cache unions of them."""

    def __init__(self, lexer: Lexer, tokens: TokenBytes, automaton: ByteAutomaton | None = None):
        self.lexer, self.tokens = lexer, tokens
        self.auto = automaton or byte_automaton(lexer)
        spec = lexer.spec
        self.tab = spec.tab_len
        self.nl_owner = spec.indent_owner
        first = tokens.data[:, 0]
        order = np.argsort(first, kind="stable")
        cuts = np.flatnonzero(np.diff(first[order])) + 1
        self.by_first_byte = [(int(first[g[0]]), np.sort(g).astype(np.int32)) for g in np.split(order, cuts) if len(g)]
        self.emitted: list[tuple[int, ...]] = [()]  # emitted-sequence ids
        self._emit_id: dict[tuple[int, int], int] = {}
        self.memo: dict[tuple, list[tuple[int, int, int]]] = {}  # part key -> [(end cfg, emitted id, group id)]
        self.part_rows: list[np.ndarray] = []  # group id -> sorted token rows
        self._auto_to_cfg = np.full(self.auto.n_states, -1, dtype=np.int64)
        self.walked = 0  # token-starts walked (for profiling)

    # -- the first byte ---------------------------------------------------------------
    def first_steps(self, cfg_id: int) -> list[tuple[tuple, tuple[int, ...]]]:
        """(part key, labels emitted by the first byte) for every first byte a token can
        have. A part key is (automaton state, indentation, absolute, first byte)."""
        check_deadline("the token-level index")
        auto = self.auto
        state = auto.table.id(self.lexer.table[cfg_id])
        out = []
        for b, _ in self.by_first_byte:
            for e in auto.edges(state, b):
                k = int(auto.kind[e])
                if k == _NL_GOES_ON:
                    acc, absolute = indent_step(0, b, self.tab), b == 10  # a carried NEWLINE: relative
                elif k == _NL_STARTS:
                    acc, absolute = indent_step(NO_LINE_BREAK, b, self.tab), True
                else:
                    acc, absolute = 0, False
                lead: tuple[int, ...] = ()
                if auto.ends_nl[e]:
                    if acc < 0:
                        continue  # lark's Indenter cannot read a NEWLINE with no line break
                    if auto.lab[e] >= 0:
                        lead = (INDENT_BASE + 2 * acc + int(absolute),)
                    acc, absolute = 0, False
                elif auto.lab[e] >= 0:
                    lead = (int(auto.lab[e]),)
                nxt = int(auto.nxt[e])
                if not auto.in_nl[nxt]:
                    acc, absolute = 0, False
                out.append(((nxt, acc, bool(absolute), b), lead))
        return out

    def ensure(self, keys: Iterable[tuple], budget: int = 1 << 20) -> None:
        """Walk every part not walked yet, in batches of about `budget` token-starts."""
        rows_of = dict(self.by_first_byte)
        todo = [k for k in dict.fromkeys(keys) if k not in self.memo]
        batch: list[tuple] = []
        size = 0
        for k in todo:
            batch.append(k)
            size += len(rows_of[k[3]])
            if size >= budget:
                self._walk(batch, rows_of)
                batch, size = [], 0
        if batch:
            self._walk(batch, rows_of)

    def parts(self, cfg_id: int, steps: list | None = None) -> dict[tuple[int, tuple[int, ...]], list[int]]:
        """(end config, emitted labels) -> group ids whose rows lead there from `cfg_id`
        (`steps`: its :meth:`first_steps`, if known)."""
        steps = self.first_steps(cfg_id) if steps is None else steps
        self.ensure(k for k, _ in steps)
        out: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        emitted = self.emitted
        for key, lead in steps:
            for end, eid, gid in self.memo[key]:
                out.setdefault((end, lead + emitted[eid] if lead else emitted[eid]), []).append(gid)
        return out

    def index(self, cfg_id: int) -> ConfigTransitions:
        """Every token's outcomes from config `cfg_id`, grouped by (end config, emitted)."""
        out = []
        for (end, emitted), gids in self.parts(cfg_id).items():
            rows = np.concatenate([self.part_rows[g] for g in gids])
            out.append((end, emitted, np.unique(rows)))
        return out

    # -- the walk ---------------------------------------------------------------------
    def _walk(self, keys: list[tuple], rows_of: dict[int, np.ndarray]) -> None:
        """Advance every (part, token) pair of `keys` byte by byte until its token ends;
        record (part, end state, emitted) -> rows."""
        auto, data, lengths, tab = self.auto, self.tokens.data, self.tokens.lengths, self.tab
        sizes = np.array([len(rows_of[k[3]]) for k in keys], dtype=np.int64)
        self.walked += int(sizes.sum())
        part = np.repeat(np.arange(len(keys), dtype=np.int32), sizes)
        row = np.concatenate([rows_of[k[3]] for k in keys])
        state = np.repeat(np.array([k[0] for k in keys], dtype=np.int32), sizes)
        acc = np.repeat(np.array([k[1] for k in keys], dtype=np.int32), sizes)
        absolute = np.repeat(np.array([k[2] for k in keys], dtype=bool), sizes)
        eid = np.zeros(len(row), dtype=np.int64)
        pos = 1
        done_parts: list[np.ndarray] = []
        done_state: list[np.ndarray] = []
        done_eid: list[np.ndarray] = []
        done_row: list[np.ndarray] = []
        while len(row):
            check_deadline("the token-level index")
            fin = lengths[row] <= pos
            if fin.any():
                done_parts.append(part[fin])
                done_state.append(state[fin])
                done_eid.append(eid[fin])
                done_row.append(row[fin])
                keep = ~fin
                part, row, state, acc, absolute, eid = part[keep], row[keep], state[keep], acc[keep], absolute[keep], eid[keep]
                if not len(row):
                    break
            b = data[row, pos]
            k = state.astype(np.int64) * 256 + b
            e0 = auto.ptr[k]
            cnt = auto.ptr[k + 1] - e0
            src = np.repeat(np.arange(len(row)), cnt)
            if not len(src):
                break
            starts = np.cumsum(cnt) - cnt
            edge = e0[src] + (np.arange(len(src)) - starts[src])
            b = b[src]
            part, row, eid = part[src], row[src], eid[src]
            kind = auto.kind[edge]
            acc_in, abs_in = acc[src], absolute[src]
            acc = np.where(kind == _NL_GOES_ON, _indent_step_vec(acc_in, b, tab),
                           np.where(kind == _NL_STARTS, _indent_step_vec(np.full_like(acc_in, NO_LINE_BREAK), b, tab),
                                    0)).astype(np.int32)
            absolute = np.where(kind == _NL_GOES_ON, abs_in | (b == 10), kind == _NL_STARTS)
            lab = auto.lab[edge]
            nl_end = auto.ends_nl[edge]
            alive = ~(nl_end & (acc < 0))
            lab = np.where(nl_end & (lab >= 0), INDENT_BASE + 2 * acc.astype(np.int64) + absolute, lab)
            state = auto.nxt[edge]
            emits = (lab >= 0) & alive
            if emits.any():
                eid = eid.copy()
                eid[emits] = self._extend(eid[emits], lab[emits])
            goes_on_nl = auto.in_nl[state]
            acc = np.where(goes_on_nl, acc, 0).astype(np.int32)
            absolute = absolute & goes_on_nl
            if not alive.all():
                part, row, state, acc, absolute, eid = (part[alive], row[alive], state[alive], acc[alive],
                                                        absolute[alive], eid[alive])
            pos += 1
        if not done_row:
            for k in keys:
                self.memo[k] = []
            return
        part = np.concatenate(done_parts)
        state = np.concatenate(done_state)
        eid = np.concatenate(done_eid)
        row = np.concatenate(done_row)
        # group by (part, end state, emitted), rows sorted within a group
        n_e = int(eid.max()) + 1
        gkey = (part.astype(np.int64) * self.auto.n_states + state) * n_e + eid
        order = np.lexsort((row, gkey))
        gkey, row = gkey[order], row[order]
        cuts = np.flatnonzero(np.diff(gkey)) + 1
        heads = np.concatenate([[0], cuts])
        result: list[list[tuple[int, int, int]]] = [[] for _ in keys]
        for h, rows in zip(heads.tolist(), np.split(row, cuts)):
            g = int(gkey[h])
            e = g % n_e
            p, st = divmod(g // n_e, self.auto.n_states)
            gid = len(self.part_rows)
            self.part_rows.append(_dedupe_sorted(rows))
            result[p].append((self._cfg_of(st), e, gid))
        for k, res in zip(keys, result):
            self.memo[k] = res

    def _cfg_of(self, state: int) -> int:
        got = int(self._auto_to_cfg[state])
        if got < 0:
            got = self._auto_to_cfg[state] = self.lexer.table.id(self.auto.table[state])
        return got

    def _extend(self, eid: np.ndarray, lab: np.ndarray) -> np.ndarray:
        """Ids of the emitted sequences `eid` with one more label each."""
        key = (eid << _LABEL_BITS) | lab
        uniq, inverse = np.unique(key, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        table, emitted = self._emit_id, self.emitted
        for j, kk in enumerate(uniq.tolist()):
            pair = (kk >> _LABEL_BITS, kk & ((1 << _LABEL_BITS) - 1))
            got = table.get(pair)
            if got is None:
                got = table[pair] = len(emitted)
                emitted.append(emitted[pair[0]] + (pair[1],))
            ids[j] = got
        return ids[inverse.reshape(-1)]


def _dedupe_sorted(a: np.ndarray) -> np.ndarray:
    if len(a) > 1:
        dup = a[1:] == a[:-1]
        if dup.any():
            return a[np.concatenate([[True], ~dup])]
    return a


def index_config(lexer: Lexer, cfg_id: int, tokens: TokenBytes) -> ConfigTransitions:
    """Every token's outcomes from config `cfg_id`, grouped by (end config, emitted)."""
    return _Indexer(lexer, tokens).index(cfg_id)


def explore(lexer: Lexer, tokens: TokenBytes, on_config: Callable[[int, dict, _Indexer], None],
            progress: Callable[[int, int], None] | None = None, timings: dict | None = None) -> int:
    """Breadth-first over every config reachable from the initial one by whole tokens,
    in waves: the parts a wave needs are walked together, then `on_config(cfg_id, parts,
    indexer)` is called once per config with :meth:`_Indexer.parts`. `progress(done,
    total)` counts configs against the byte automaton's states, a bound known before the
    walk (every config is one of them), so its total never moves. `timings`, if given,
    gets [wall, CPU] seconds of "lexer configurations" (the byte automaton and viable
    labels), "token-level index" (the walks) and "store rows" (the rest, `on_config`
    included). Returns the count."""
    with phase_clock(timings, "lexer configurations"):
        indexer = _Indexer(lexer, tokens)
        lexer.prime_viable(indexer.auto.viable_labels())
    total = indexer.auto.n_states
    check_limit("max_lexer_configs", total, "lexer (byte automaton states)")
    seen = {lexer.initial}
    wave = [lexer.initial]
    done = 0
    while wave:
        with phase_clock(timings, "token-level index"):
            steps = {q: indexer.first_steps(q) for q in wave}
            indexer.ensure(k for st in steps.values() for k, _ in st)
        nxt = []
        with phase_clock(timings, "store rows"):
            for q in wave:
                check_deadline("the mask store")
                parts = indexer.parts(q, steps.pop(q))
                on_config(q, parts, indexer)
                for end, _ in parts:
                    if end not in seen:
                        seen.add(end)
                        nxt.append(end)
                done += 1
                if progress:
                    progress(done, total)
        wave = nxt
    return done

def build_mask_store(lexer: Lexer, tokens: TokenBytes, vocab_size: int,
                     progress: Callable[[int, int], None] | None = None, timings: dict | None = None) -> MaskStore:
    """Explore every reachable configuration and group its tokens into rows. A row's
    token set is a union of the indexer's shared parts; a union met before (configs
    agreeing on every first byte) is not rebuilt. `timings`: see :func:`explore`."""
    table_rows: dict[int, list[Row]] = {}
    n_rows = [0]
    sets = SetInterner(vocab_size)
    unions: dict[bytes, int] = {}

    def intern(gids: tuple[int, ...], indexer) -> int:
        key = np.array(gids, dtype=np.int32).tobytes()  # a compact exact key (memory)
        sid = unions.get(key)
        if sid is None:
            rows = np.concatenate([indexer.part_rows[g] for g in gids]) if len(gids) > 1 else indexer.part_rows[gids[0]]
            ids = tokens.ids[rows]
            if len(gids) > 1:
                ids = _sorted_unique(ids)
            neg = len(ids) * 2 > vocab_size
            if neg:
                full = np.ones(vocab_size, dtype=bool)
                full[ids] = False
                ids = np.flatnonzero(full).astype(np.int32)
            sid = unions[key] = sets.add(ids.astype(np.int32, copy=False), neg)
        return sid

    def on_config(cfg_id: int, parts, indexer) -> None:
        groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
        for (end, emitted), gids in parts.items():
            entered = lexer.entered(end)
            if entered is None:
                continue
            groups.setdefault((emitted, entered), []).extend(gids)
        table_rows[cfg_id] = [(e, n, intern(tuple(sorted(set(g))), indexer)) for (e, n), g in sorted(groups.items())]
        n_rows[0] += len(groups)
        check_limit("max_store_rows", n_rows[0], "mask store")

    explore(lexer, tokens, on_config, progress, timings)
    n = len(lexer.table)
    rows = [table_rows.get(q, []) for q in range(n)]
    return MaskStore(vocab_size, list(lexer.table.configs), rows, sets.set_ids, sets.negated).shared()


def _sorted_unique(ids: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort and a neighbour comparison; numpy's unique hashes)."""
    ids = np.sort(ids, kind="stable")
    if len(ids) > 1:
        dup = ids[1:] == ids[:-1]
        if dup.any():
            ids = ids[np.concatenate([[True], ~dup])]
    return ids
