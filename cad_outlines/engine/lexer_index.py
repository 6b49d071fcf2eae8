"""The token-level lexer index: for every lexer configuration and vocabulary token,
the (next configuration, terminal labels emitted) pairs the token can lead to.

Seed 002's ``nfa_transition``, computed without a Python loop over configurations x
vocabulary: for one starting configuration all tokens advance together as numpy
arrays through the owner's DFA and its constraint runs; only where a lexeme can end
are tokens regrouped (by the resulting configuration, then by their next byte).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .lexer import BOUNDARY, INDENT_BASE, NO_LINE_BREAK, Config, Lexer, indent_step

__all__ = ["TokenBytes", "ConfigTransitions", "index_config", "explore"]


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
        lengths = np.array([len(tb[i]) for i in ids], dtype=np.int32)
        data = np.zeros((len(ids), int(lengths.max()) if len(ids) else 1), dtype=np.uint8)
        for row, i in enumerate(ids):
            data[row, : lengths[row]] = np.frombuffer(tb[i], dtype=np.uint8)
        return cls(ids, data, lengths)


# Results for one starting config: parallel lists of (end config id, emitted labels, rows)
# where rows index into TokenBytes.ids.
ConfigTransitions = list[tuple[int, tuple[int, ...], np.ndarray]]


def _unique_rows(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique columns of a (k, m) int matrix: (unique (k, u), inverse (m,))."""
    if mat.shape[0] == 0:
        return mat[:, :1], np.zeros(mat.shape[1], dtype=np.int64)
    uniq, inverse = np.unique(mat.T, axis=0, return_inverse=True)
    return uniq.T, inverse.reshape(-1)


class _Indexer:
    """The vectorised walk for one lexer over one vocabulary. `first_byte_cache` maps
    (first byte, constraint runs left after it) to the outcomes of the tokens starting
    with that byte from a lexeme boundary: a boundary config's constraints usually die
    on the first byte, so most of its work is shared with other boundary configs."""

    def __init__(self, lexer: Lexer, tokens: TokenBytes):
        self.lexer, self.tokens = lexer, tokens
        spec = lexer.spec
        self.spec, self.autos, self.ignored = spec, spec.automata, spec.ignored
        self.nl_owner, self.nl_label, self.tab = spec.indent_owner, spec.indent_label, spec.tab_len
        self.first_byte_cache: dict[tuple[int, tuple], list[tuple[tuple[int, tuple[int, ...]], np.ndarray]]] = {}
        first = tokens.data[:, 0]
        order = np.argsort(first, kind="stable")
        cuts = np.flatnonzero(np.diff(first[order])) + 1
        self.by_first_byte = [(int(first[g[0]]), g.astype(np.int32)) for g in np.split(order, cuts) if len(g)]

    def index(self, cfg_id: int) -> ConfigTransitions:
        """Every token's outcomes from config `cfg_id`, grouped by (end config, emitted)."""
        start = self.lexer.table[cfg_id]
        results: dict[tuple[int, tuple[int, ...]], list[np.ndarray]] = {}
        if start.owner == BOUNDARY:
            for b, rows in self.by_first_byte:
                base = self.lexer._advance_cons(start.cons, b)
                if base is None:
                    continue
                key = (b, base)
                got = self.first_byte_cache.get(key)
                if got is None:
                    local: dict[tuple[int, tuple[int, ...]], list[np.ndarray]] = {}
                    work: deque = deque()
                    self._expand(work, b, base, rows, np.ones(len(rows), dtype=np.int32), ())
                    self._drain(work, local)
                    got = self.first_byte_cache[key] = [(k, np.concatenate(v)) for k, v in local.items()]
                for k, r in got:
                    results.setdefault(k, []).append(r)
        else:
            n = len(self.tokens.ids)
            # a NEWLINE lexeme carried in: its indentation so far is added at decode time
            work = deque([("o", start.owner, tuple(j for j, _ in start.cons), np.arange(n, dtype=np.int32),
                           np.zeros(n, np.int32), np.full(n, start.state, np.int32), _cons_matrix(start.cons, n), (),
                           np.zeros(n, np.int32), np.zeros(n, dtype=bool))])
            self._drain(work, results)
        return [(cfg, emitted, np.concatenate(parts)) for (cfg, emitted), parts in results.items()]

    def _record(self, results: dict, end: Config, emitted: tuple[int, ...], rows: np.ndarray) -> None:
        results.setdefault((self.lexer.table.id(end), emitted), []).append(rows)

    def _expand(self, work: deque, b: int, base, rows: np.ndarray, pos: np.ndarray, emitted: tuple[int, ...]) -> None:
        """Tokens at a lexeme boundary whose next byte is `b` (constraints after it: `base`)."""
        spec = self.spec
        for i in spec.starters[b]:
            comp = spec.competitors[i][b]
            if comp is not None:
                self._push_after(work, i, int(spec.first[i, b]), tuple(sorted(set(base) | set(comp))), rows, pos,
                                 emitted, b)

    def _push_after(self, work: deque, i: int, s: int, cons: tuple[tuple[int, int], ...], rows: np.ndarray,
                    pos: np.ndarray, emitted: tuple[int, ...], first: int) -> None:
        """Tokens just started a lexeme of owner i with byte `first`, reaching state s
        (constraints `cons` already advanced)."""
        a = self.autos[i]
        lab = int(a.label[s])
        acc0 = indent_step(NO_LINE_BREAK, first, self.tab) if i == self.nl_owner else 0
        if lab >= 0 and not (lab == self.nl_label and acc0 < 0):
            elem = INDENT_BASE + 2 * acc0 + 1 if lab == self.nl_label else lab
            work.append(("b", self.lexer.ended_cons(i, s, cons), rows, pos,
                         emitted if lab in self.ignored else emitted + (elem,)))
        if a.live[s]:
            n = len(rows)
            work.append(("o", i, tuple(j for j, _ in cons), rows, pos, np.full(n, s, dtype=np.int32),
                         _cons_matrix(cons, n), emitted, np.full(n, acc0, np.int32), np.ones(n, dtype=bool)))

    def _drain(self, work: deque, results: dict) -> None:
        data, lengths = self.tokens.data, self.tokens.lengths
        lexer, autos = self.lexer, self.autos
        nl_label, tab = self.nl_label, self.tab
        while work:
            item = work.popleft()
            if item[0] == "b":
                _, cons, rows, pos, emitted = item
                done = pos >= lengths[rows]
                if done.any():
                    self._record(results, Config(BOUNDARY, 0, cons), emitted, rows[done])
                    rows, pos = rows[~done], pos[~done]
                if not len(rows):
                    continue
                nxt = data[rows, pos]
                order = np.argsort(nxt, kind="stable")
                cuts = np.flatnonzero(np.diff(nxt[order])) + 1
                for group in np.split(order, cuts):
                    b = int(nxt[group[0]])
                    base = lexer._advance_cons(cons, b)
                    if base is not None:
                        self._expand(work, b, base, rows[group], pos[group] + 1, emitted)
                continue

            _, i, terms, rows, pos, ostate, cstates, emitted, acc, absolute = item
            a = autos[i]
            cautos = [autos[j] for j in terms]
            is_nl = i == self.nl_owner
            while len(rows):
                done = pos >= lengths[rows]
                if done.any():
                    self._record_owner_ends(results, i, terms, cautos, ostate[done], cstates[:, done], emitted,
                                            rows[done])
                    keep = ~done
                    rows, pos, ostate, cstates = rows[keep], pos[keep], ostate[keep], cstates[:, keep]
                    acc, absolute = acc[keep], absolute[keep]
                    if not len(rows):
                        break
                b = data[rows, pos]
                if is_nl:
                    acc = np.where(b == 10, 0, np.where(acc < 0, acc, acc + (b == 32) + tab * (b == 9))).astype(np.int32)
                    absolute = absolute | (b == 10)
                ostate = a.trans[ostate, b]
                alive = ostate != a.dead
                for c, ca in enumerate(cautos):
                    u = cstates[c]
                    alive &= ~(ca.pending[u] & ~ca.block[u, b])  # a match held back by a lookahead, confirmed
                    v = ca.trans[u, b]
                    alive &= ~((ca.label[v] >= 0) & ~ca.blocked[v])
                    cstates[c] = np.where(ca.live[v] | (ca.label[v] >= 0), v, ca.dead)
                pos = pos + 1
                rows, pos, ostate, cstates = rows[alive], pos[alive], ostate[alive], cstates[:, alive]
                acc, absolute = acc[alive], absolute[alive]
                if not len(rows):
                    break
                labels = a.label[ostate]
                ends = labels >= 0
                if is_nl:  # a NEWLINE with no line break cannot end (lark's Indenter fails on it)
                    ends &= ~((labels == nl_label) & (acc < 0))
                if ends.any():
                    elems = labels[ends]
                    if is_nl:
                        elems = np.where(elems == nl_label, INDENT_BASE + 2 * acc[ends] + absolute[ends], elems)
                    self._spawn_ends(work, i, terms, cautos, ostate[ends], cstates[:, ends], elems, rows[ends],
                                     pos[ends], emitted)
                cont = a.live[ostate]
                rows, pos, ostate, cstates = rows[cont], pos[cont], ostate[cont], cstates[:, cont]
                acc, absolute = acc[cont], absolute[cont]

    def _record_owner_ends(self, results, i, terms, cautos, ostate, cstates, emitted, rows) -> None:
        uniq, inverse = _unique_rows(np.vstack([ostate[None, :], cstates]))
        for k in range(uniq.shape[1]):
            col = uniq[:, k]
            self._record(results, Config(i, int(col[0]), tuple(sorted(_cons_of(terms, cautos, col[1:])))), emitted,
                         rows[inverse == k])

    def _spawn_ends(self, work, i, terms, cautos, ostate, cstates, labels, rows, pos, emitted) -> None:
        uniq, inverse = _unique_rows(np.vstack([ostate[None, :], labels[None, :], cstates]))
        for k in range(uniq.shape[1]):
            col = uniq[:, k]
            s, lab = int(col[0]), int(col[1])
            cons = self.lexer.ended_cons(i, s, _cons_of(terms, cautos, col[2:]))
            sel = inverse == k
            work.append(("b", cons, rows[sel], pos[sel], emitted if lab in self.ignored else emitted + (lab,)))


def index_config(lexer: Lexer, cfg_id: int, tokens: TokenBytes) -> ConfigTransitions:
    """Every token's outcomes from config `cfg_id`, grouped by (end config, emitted)."""
    return _Indexer(lexer, tokens).index(cfg_id)


def _cons_matrix(cons: tuple[tuple[int, int], ...], m: int) -> np.ndarray:
    """(len(cons), m) int32: each constraint run's state, repeated for m tokens."""
    return np.repeat(np.array([u for _, u in cons], dtype=np.int32).reshape(-1, 1), m, axis=1)


def _cons_of(terms, cautos, col) -> tuple[tuple[int, int], ...]:
    return tuple((j, int(u)) for j, ca, u in zip(terms, cautos, col) if u != ca.dead)


def explore(lexer: Lexer, tokens: TokenBytes, on_config: Callable[[int, ConfigTransitions], None],
            progress: Callable[[int, int], None] | None = None) -> int:
    """Breadth-first over every config reachable from the initial one by whole tokens,
    calling `on_config(cfg_id, transitions)` once per config. Returns the count."""
    indexer = _Indexer(lexer, tokens)
    seen = {lexer.initial}
    queue = deque([lexer.initial])
    done = 0
    while queue:
        cfg = queue.popleft()
        trans = indexer.index(cfg)
        on_config(cfg, trans)
        for end, _, _ in trans:
            if end not in seen:
                seen.add(end)
                queue.append(end)
        done += 1
        if progress:
            progress(done, done + len(queue))
    return done
