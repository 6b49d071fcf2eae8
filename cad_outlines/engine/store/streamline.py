"""Mask-store streamlining: rewrite the store with grammar analyses so that decoding asks
the parser fewer questions, with identical masks (the mask-store streamlining blog and its technical appendix: docs/references.md).

A row ``(emitted, entered, set)`` of configuration q passes, for a live configuration
with parser state P and labels `pending` beyond it, iff P·pending·emitted·n is a prefix
of the language for some n in `entered` (-1: nothing needed; ``()``: nothing entered).
Each step below replaces rows only by rows with the same answer in every such context:

1. **interchangeable**: labels of a group of interchangeable terminals are replaced by
   the group's representative (appendix 6.2: PXS and PXφ(S) pass together); rows that
   become equal merge (their token sets are OR-ed).
2. **one-hop successors**: an entered label n is dropped where emitted·n holds an
   adjacent pair that never occurs in a sentence, a row where emitted does or no entered
   label is left (SynCode's pruning; ``one_hop_only`` applies it to the original store
   as the baseline).
3. **pairwise always/never**: a row's check is cut to its shortest prefix from which
   every adjacent pair is always legal (appendix 6.1: PX·a·b passes iff PX·a does when
   ``is_always_legal(a, b)``); entered labels go when one of them is always legal after
   the last emitted label. In a configuration whose current lexeme can only be label x,
   x itself was checked when the lexeme was entered, so a row cut to ``(x,)`` or to
   entered ``(x,)`` is unconditional: it becomes ``((), ())``, which needs no parser.
4. **whole sequences**: the exact ``is_never_legal`` (Bar-Hillel) on every remaining
   sequence of three or more labels, and ``is_always_legal`` on suffixes of up to
   ``first_k`` labels (chained), as in step 3.

Labels carrying a NEWLINE under an indenter are never cut across (the indentation is
checked by the parser) and are kept in never-legal answers with the freedom the
Indenter gives them (vanish inside brackets; INDENT/DEDENTs after them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .grammar_analysis import START, GrammarAnalysis, LRGame
from .lexer import BOUNDARY, INDENT_BASE, Lexer
from .mask_store import MaskStore, Row, SetInterner
from .native_store import lexer_graph

__all__ = ["StreamlineStep", "StreamlineResult", "streamline", "one_hop_only", "config_contexts", "STEPS"]

STEPS = ("original", "interchangeable", "one-hop successors", "pairwise always/never", "whole sequences")


@dataclass
class StreamlineStep:
    name: str
    rows: int
    seconds: float
    rows_per_config: list[int] = field(default_factory=list)


@dataclass
class StreamlineResult:
    store: MaskStore
    steps: list[StreamlineStep]
    groups: list[list[str]]
    never_queries: int = 0
    always_queries: int = 0
    contexts: list[tuple[str, ...]] = field(default_factory=list)  # per config (see config_contexts)


class _Rows:
    """Rows per config as {(emitted, entered): set id, or a list of them once rows merged}
    while they are rewritten (a bare int for the unmerged majority: memory). With
    `consume` the store's own row lists are emptied as they are read (the caller no longer
    needs them; they would double the memory held)."""

    def __init__(self, store: MaskStore, consume: bool = False):
        self.store = store
        self.rows: list[dict[tuple, int | list[int]]] = []
        for q, rows in enumerate(store.rows):
            d: dict[tuple, int | list[int]] = {}
            for e, n, sid in rows:
                _merge(d, (e, n), sid)
            self.rows.append(d)
            if consume:
                store.rows[q] = []

    def rewrite(self, fn: Callable[[int, tuple, tuple], tuple | None], qclass: list | None = None) -> None:
        """`fn(q, emitted, entered)` -> new (emitted, entered) or None to drop. With
        `qclass` (per config, a hashable summary of everything `fn` reads about q), answers
        are memoised per (class, emitted, entered)."""
        memo: dict = {}
        for q, d in enumerate(self.rows):
            new: dict[tuple, int | list[int]] = {}
            cls = None if qclass is None else qclass[q]
            for key, sids in d.items():
                if qclass is None:
                    got = fn(q, *key)
                else:
                    mk = (cls, key)
                    got = memo.get(mk, memo)
                    if got is memo:
                        got = memo[mk] = fn(q, *key)
                if got is not None:
                    _merge(new, got, sids)
            self.rows[q] = new

    def count(self) -> list[int]:
        return [len(d) for d in self.rows]

    def to_store(self) -> MaskStore:
        """Materialise: the sets of merged rows are OR-ed and interned."""
        st = self.store
        sets = SetInterner(st.vocab_size)
        cache: dict[tuple[int, ...], int] = {}

        out_rows: list[list[Row]] = []
        for d in self.rows:
            rows = []
            for (e, n), sids in sorted(d.items()):
                key = (sids,) if isinstance(sids, int) else tuple(sorted(set(sids)))
                sid = cache.get(key)
                if sid is None and len(key) == 1:  # unmerged: the set as it was
                    sid = cache[key] = sets.add(st.set_ids[key[0]], st.set_negated[key[0]])
                if sid is None:
                    mask = np.zeros(st.vocab_size, dtype=bool)
                    st.union_into(mask, key)
                    sid = cache[key] = sets.add_mask(mask)
                rows.append((e, n, sid))
            out_rows.append(rows)
        return MaskStore(st.vocab_size, list(st.configs), out_rows, sets.set_ids, sets.negated).shared()


def _merge(d: dict, key: tuple, sids: int | list[int]) -> None:
    """Add set id(s) `sids` to row `key` of `d` (an int while the row holds one set)."""
    got = d.get(key)
    if got is None:
        d[key] = sids if isinstance(sids, int) else list(sids)
        return
    if isinstance(got, int):
        got = d[key] = [got]
    if isinstance(sids, int):
        got.append(sids)
    else:
        got.extend(sids)


def _label_view(lexer: Lexer):
    names = list(lexer.spec.labels)
    nl = lexer.spec.indent_label

    def name(x: int) -> str:
        return names[nl] if x >= INDENT_BASE else names[x]

    return names, nl, name


def config_contexts(lexer: Lexer, configs) -> list[tuple[str, ...]]:
    """For every configuration, the labels that can come right before its current lexeme
    (:data:`START` for none): the last label any text reaching it has emitted, ignored
    lexemes skipped. A fixpoint over the byte-level configuration graph (the native byte
    automaton, :class:`~cad_outlines.engine.store.native_store.LexerGraph`), which holds every
    token path, so the sets are supersets of what decoding meets."""
    graph = lexer_graph(lexer)
    n = graph.n_states
    src, nxt, lab = graph.edges()
    edges = np.unique(np.stack([src, nxt, lab]), axis=1)
    start_bit = 1 << len(lexer.spec.labels)
    passing: list[list[int]] = [[] for _ in range(n)]  # c -> successors reached with no label
    ctx = [0] * n
    for c, i, x in edges.T.tolist():
        if x < 0:
            passing[c].append(i)
        else:
            ctx[i] |= 1 << x
    ctx[0] |= start_bit  # the automaton's state 0 is the lexer's initial config
    todo = [c for c in range(n) if ctx[c]]
    while todo:
        c = todo.pop()
        for i in passing[c]:
            if ctx[c] & ~ctx[i]:
                ctx[i] |= ctx[c]
                todo.append(i)
    names = lexer.spec.labels
    state_of = graph.state_of()
    result = []
    for cfg in configs:
        bits = ctx[state_of[cfg]]
        labels = tuple(names[i] for i in range(len(names)) if bits >> i & 1)
        result.append(labels + ((START,) if bits & start_bit else ()))
    return result


def _contexts_or_none(contexts, q: int, limit: int):
    """The contexts of q if few enough to reason about one by one, else (None,) (no
    knowledge)."""
    if contexts is None:
        return (None,)
    c = contexts[q]
    return c if 0 < len(c) <= limit else (None,)


def one_hop_only(store: MaskStore, lexer: Lexer, analysis: GrammarAnalysis,
                 contexts: list[tuple[str, ...]] | None = None, limit: int = 8) -> int:
    """Rows left after SynCode-style pruning alone (the baseline): rows whose labels,
    after the label before the current lexeme, hold a pair that never occurs."""
    rows = _Rows(store)
    _one_hop(rows, lexer, analysis, contexts, limit)
    return sum(rows.count())


def _one_hop(rows: _Rows, lexer: Lexer, ga: GrammarAnalysis, contexts, limit: int) -> None:
    _, _, name = _label_view(lexer)
    memo: dict = {}

    def possible(q: int, seq: tuple[str, ...]) -> bool:
        ctx = _contexts_or_none(contexts, q, limit)
        key = (ctx, seq)
        got = memo.get(key)
        if got is None:
            got = memo[key] = any(ga.chain_possible(seq, after=y) for y in ctx)
        return got

    def fn(q, e, n):
        names = tuple(name(x) for x in e)
        if not possible(q, names):
            return None
        if not n:
            return e, n
        kept = tuple(x for x in n if x < 0 or possible(q, names + (name(x),)))
        return (e, kept) if kept else None

    classes: dict = {}
    rows.rewrite(fn, [classes.setdefault(_contexts_or_none(contexts, q, limit), len(classes))
                      for q in range(len(rows.rows))])


def streamline(store: MaskStore, lexer: Lexer, analysis: GrammarAnalysis,
               progress: Callable[[str], None] | None = None, context_limit: int = 8,
               window: int = 8, lr: LRGame | None = None, consume: bool = False) -> StreamlineResult:
    """The streamlined store and the rows left after each step (see the module doc).

    Every row is judged in the contexts its configuration can be met in
    (:func:`config_contexts`): the label before the current lexeme. A configuration
    with more than `context_limit` of them is judged without context. ``is_never_legal``
    is decided exactly for sequences of up to `window` labels (context included) and by
    their windows beyond. With `lr` (an :class:`LRGame` on the grammar's parse tables),
    always-legal answers are also proved on the LALR automaton, for whole suffixes and
    at the start of the text. With `consume`, `store`'s row lists are emptied on the way
    (memory; the caller must not use them afterwards).

    Works on a whole store (the contexts are a fixpoint over every configuration): a lazy
    grammar, whose rows are built one configuration at a time, is not streamlined."""
    steps = [StreamlineStep(STEPS[0], store.n_rows, 0.0, [len(r) for r in store.rows])]
    t0 = time.perf_counter()
    lexer.prime_entered(lexer_graph(lexer).entered())
    contexts = config_contexts(lexer, store.configs)
    context_s = time.perf_counter() - t0
    run = _Streamliner(_Rows(store, consume), lexer, analysis, contexts, context_limit, window, lr,
                       progress or (lambda msg: None), steps)
    groups = run.step(STEPS[1], run.interchangeable)
    run.step(STEPS[2], run.one_hop)
    steps[2].seconds += context_s
    run.find_single()
    run.step(STEPS[3], run.pairwise)
    n_never = run.step(STEPS[4], run.whole_sequences)
    t0 = time.perf_counter()
    out = run.rows.to_store()
    steps[-1].seconds += time.perf_counter() - t0
    return StreamlineResult(out, steps, groups, n_never, run.n_always, contexts)


class _Streamliner:
    """The steps of :func:`streamline` over one store's rows, and what they share: the label
    names, the contexts of every configuration, the interchangeable labels' representatives
    (`canon`), the configurations whose lexeme can only be one checked label (`single`) and
    the always-legal answers found so far."""

    def __init__(self, rows: _Rows, lexer: Lexer, ga: GrammarAnalysis, contexts: list[tuple[str, ...]],
                 context_limit: int, window: int, lr: LRGame | None, say: Callable[[str], None],
                 steps: list[StreamlineStep]):
        self.rows, self.lexer, self.ga, self.contexts = rows, lexer, ga, contexts
        self.context_limit, self.window, self.lr, self.say, self.steps = context_limit, window, lr, say, steps
        self.names, self.nl, self.name = _label_view(lexer)
        self.canon: dict[int, int] = {}
        self.single: dict[int, int] = {}
        self.always_memo: dict = {}
        self.n_always = 0
        self.qclass: list[int] = []

    def step(self, name: str, fn: Callable[[], object]):
        """Run one step and record the rows it leaves; returns what the step returns."""
        t0 = time.perf_counter()
        got = fn()
        counts = self.rows.count()
        self.steps.append(StreamlineStep(name, sum(counts), time.perf_counter() - t0, counts))
        self.say(f"{name}: {sum(counts):,} rows")
        return got

    # -- 1. interchangeable terminals ---------------------------------------------------------
    def interchangeable(self) -> list[list[str]]:
        """Labels of a group of interchangeable terminals become the group's representative."""
        ga, names = self.ga, self.names
        label_id = {n: i for i, n in enumerate(names)}
        emitted_labels = [n for i, n in enumerate(names) if i not in self.lexer.spec.ignored]
        exclude = ([ga.newline] if ga.newline else []) + list(ga.brackets)
        groups = ga.interchangeable_groups(candidates=emitted_labels, exclude=exclude)
        canon = self.canon
        for grp in groups:
            rep = label_id[grp[0]]
            for member in grp:
                canon[label_id[member]] = rep

        def interchange(q, e, n):
            return tuple(canon.get(x, x) for x in e), tuple(sorted({canon.get(x, x) for x in n}))

        if canon:
            self.rows.rewrite(interchange, [0] * len(self.rows.rows))
        return groups

    # -- 2. one-hop successors ------------------------------------------------------------------
    def one_hop(self) -> None:
        _one_hop(self.rows, self.lexer, self.ga, self.contexts, self.context_limit)

    def find_single(self) -> None:
        """The configurations whose current lexeme can only be one (checked) label, and each
        configuration's class: what :meth:`cut` and :meth:`never` read about it."""
        nl = self.nl
        for q, cfg in enumerate(self.rows.store.configs):
            if cfg.owner == BOUNDARY:
                continue
            ent = self.lexer.entered(q)
            if ent and len(ent) == 1 and ent[0] >= 0 and ent[0] != nl:
                self.single[q] = self.canon.get(ent[0], ent[0])
        classes: dict = {}
        self.qclass = [classes.setdefault((self._contexts(q), self.single.get(q)), len(classes))
                       for q in range(len(self.rows.rows))]

    def _contexts(self, q: int):
        return _contexts_or_none(self.contexts, q, self.context_limit)

    # -- always legal ---------------------------------------------------------------------------
    def always_names(self, x: str | None, seq: tuple[str, ...]) -> bool:
        """Proved always legal after x (None: at the start of the text)."""
        key = (x, seq)
        got = self.always_memo.get(key)
        if got is None:
            self.n_always += 1
            got = x is not None and len(seq) <= self.ga.first_k and self.ga.always_legal(x, seq)
            if not got and self.lr is not None:
                got = self.lr.always(x, seq)
            self.always_memo[key] = got
        return got

    def ok_label(self, x: int) -> bool:
        return 0 <= x < INDENT_BASE and x != self.nl

    def always(self, x: int, seq: tuple[int, ...]) -> bool:
        if not self.ok_label(x) or not all(self.ok_label(s) for s in seq):
            return False
        names = self.names
        return self.always_names(names[x], tuple(names[s] for s in seq))

    def _longest(self, max_len: int) -> int:
        return 6 if self.lr is not None and max_len > 1 else max_len

    def suffix_ok(self, e: tuple[int, ...], max_len: int) -> list[bool]:
        """ok[i] (i >= 1): from label e[i-1], the rest e[i:] is always legal: chains of
        proved segments (up to `max_len` labels; any length with the LR game)."""
        m = len(e)
        ok = [False] * (m + 1)
        ok[m] = True
        longest = self._longest(max_len)
        for i in range(m - 1, 0, -1):
            ok[i] = any(ok[i + k] and self.always(e[i - 1], e[i : i + k]) for k in range(1, min(longest, m - i) + 1))
        return ok

    def from_context(self, q: int, e: tuple[int, ...], ok: list[bool], max_len: int) -> bool:
        """Every context of q proves all of e always legal after it."""
        ctx = self._contexts(q)
        if not e or None in ctx or not all(self.ok_label(x) for x in e):
            return False
        longest = self._longest(max_len)
        labels = tuple(self.names[s] for s in e)
        return all(any(ok[k] and self.always_names(None if y == START else y, labels[:k])
                       for k in range(1, min(longest, len(e)) + 1)) for y in ctx)

    def cut(self, q: int, e: tuple[int, ...], n: tuple[int, ...], max_len: int) -> tuple[tuple, tuple]:
        """The shortest equivalent check. With entered labels the row passes iff P·e·x
        does for some x; if for one x the check of e·x cuts back into e (to e[:j]), the
        row passes iff P·e[:j] does (every P·e·x implies it). A check proved always legal
        from every context of q, or equal to the one label q's lexeme was checked with,
        needs nothing: ((), ())."""
        if -1 in n:
            n = ()
        candidates = [e] if not n else [e + (x,) for x in n]
        best = None
        for seq in candidates:
            ok = self.suffix_ok(seq, max_len)
            if self.from_context(q, seq, ok, max_len):
                return (), ()
            j = next(j for j in range(1, len(seq) + 1) if ok[j]) if seq else 0
            if (not n or j <= len(e)) and (best is None or j < len(best)):
                best = seq[:j]
        if best is None:
            return e, n
        x = self.single.get(q)
        if x is not None and best == (x,):
            return (), ()
        return best, ()

    # -- 3. pairwise always / never -------------------------------------------------------------
    def pairwise(self) -> None:
        def pairwise(q, e, n):
            x = self.single.get(q)
            if x is not None and not e and x in n:
                return (), ()
            return self.cut(q, e, n, 1)

        self.rows.rewrite(pairwise, self.qclass)

    # -- 4. whole sequences ---------------------------------------------------------------------
    def _seqs_of(self, q: int, e: tuple[int, ...], n: tuple[int, ...]):
        base = tuple(self.name(x) for x in e)
        for x in (n or (None,)):
            seq = base if x is None or x < 0 else base + (self.name(x),)
            for y in self._contexts(q):
                if len(seq) + (y is not None and y != START) >= 3:
                    yield (seq, y)

    def _windows(self, seq: tuple[str, ...], y) -> list[tuple]:
        """Queries deciding (seq after y): itself if short; else its windows (a window
        never legal makes the whole never legal; sound, not exact)."""
        window = self.window
        lead = 0 if y is None or y == START else 1
        if len(seq) + lead <= window:
            return [(seq, y)]
        out = [(seq[: window - lead], y)]
        out += [(seq[i : i + window], None) for i in range(1, len(seq) - window + 1)]
        return out

    def whole_sequences(self) -> int:
        """Exact never-legal in context, then always-legal on longer suffixes; returns the
        number of never-legal queries."""
        queries: dict[tuple, None] = {}
        met: set = set()
        qclass = self.qclass
        for q, d in enumerate(self.rows.rows):
            for e, n in d:
                if (qclass[q], e, n) in met:
                    continue
                met.add((qclass[q], e, n))
                for seq, y in self._seqs_of(q, e, n):
                    for key in self._windows(seq, y):
                        queries[key] = None
        qlist = list(queries)
        self.say(f"whole sequences: {len(qlist):,} never-legal queries")
        answers = dict(zip(qlist, self.ga.never_legal_many(qlist))) if qlist else {}

        def never(q, seq: tuple[str, ...]) -> bool:
            return all(any(answers.get(k, False) for k in self._windows(seq, y)) for y in self._contexts(q))

        def whole(q, e, n):
            base = tuple(self.name(x) for x in e)
            if n:
                kept = tuple(x for x in n if x < 0 or not never(q, base + (self.name(x),)))
                if not kept:
                    return None
                n = kept
            elif never(q, base):
                return None
            return self.cut(q, e, n, self.ga.first_k)

        self.rows.rewrite(whole, qclass)
        return len(qlist)
