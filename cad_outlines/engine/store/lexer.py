"""The byte-level lexer as a finite set of configurations (lark's basic-lexer rules).

lark's basic lexer, at each position, takes the FIRST terminal in its order whose
regex matches a non-empty prefix, with that terminal's longest match. Read byte by
byte, that rule is a set of hypotheses, each a :class:`Config`:

- ``owner``/``state``: the terminal the current lexeme is hypothesised to be, and its
  DFA state (``owner == BOUNDARY`` between lexemes);
- ``cons``: runs of DFAs that must never reach an accepting state again: every
  terminal ordered before the owner, started at the lexeme's start (had one matched,
  lark would have picked it), and each finished lexeme's own terminal, continued past
  its end (a lexeme is its terminal's longest match). A run that can no longer accept
  is dropped; one that accepts kills the hypothesis.

Configs are interned to small ints (:class:`ConfigTable`). The scalar reference that feeds
bytes from a config (every surviving config and emitted labels) is
:func:`cad_outlines.engine.reference.lexer_run.run_lexer`.
Labels are terminal names after lark's "unless" remapping (a keyword lexed by a name
regex gets the keyword's terminal); ignored labels are not emitted.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import lark
import numpy as np

from ...errors import GrammarCompileError
from ..frontend.terminals import compile_terminals

__all__ = ["BOUNDARY", "TerminalAutomaton", "LexerSpec", "Config", "ConfigTable", "Lexer", "INDENT_BASE",
           "encode_indent", "decode_indent", "indent_step", "NO_LINE_BREAK", "lexer_spec_from_lark",
           "lexer_spec_from_dfas"]

BOUNDARY = -1

# A NEWLINE label under an indenter is emitted with its indentation packed in:
# INDENT_BASE + 2 * value + absolute. `absolute` is 1 when the lexeme's last line break
# lies in the bytes read, so `value` is the indentation itself; otherwise `value` is
# what the bytes read added to the indentation carried in from before them.
INDENT_BASE = 1 << 24


def encode_indent(value: int, absolute: bool) -> int:
    return INDENT_BASE + 2 * value + int(absolute)


def decode_indent(x: int) -> tuple[int, bool]:
    v = x - INDENT_BASE
    return v >> 1, bool(v & 1)


NO_LINE_BREAK = -1  # a NEWLINE lexeme with no line break yet (only a comment): lark's Indenter fails on it


def indent_step(acc: int, b: int, tab_len: int = 8) -> int:
    """lark's Indenter counts spaces and tabs after the NEWLINE's last line break; a
    lexeme starts at NO_LINE_BREAK."""
    if b == 10:
        return 0
    if acc < 0:
        return acc
    return acc + 1 if b == 32 else acc + tab_len if b == 9 else acc


@dataclass(frozen=True)
class TerminalAutomaton:
    """One terminal's DFA over bytes. State 0 is the start; the last state is a dead
    sink (all transitions to itself), so stepping never needs a -1 check.

    ``label[s]``: the label emitted if the lexeme ends in s (-1: not accepting).
    ``block[s, b]``: a match ending in s does not count when the next byte is b (a
    trailing negative lookahead; the end of the text never blocks); ``blocked[s]`` =
    ``block[s].any()``. ``shadow[s]``: a copy of s that is not accepting, so a lexeme
    that ended in s can be continued as a "must not match longer" run.
    ``live[s]``: an accepting state is reachable from s in one or more steps."""

    name: str
    trans: np.ndarray  # int32 (n_states, 256)
    label: np.ndarray  # int32 (n_states,)
    live: np.ndarray  # bool (n_states,)
    block: np.ndarray  # bool (n_states, 256)
    blocked: np.ndarray  # bool (n_states,)
    shadow: np.ndarray  # int32 (n_states,)

    @functools.cached_property
    def dead(self) -> int:
        return self.trans.shape[0] - 1

    @functools.cached_property
    def pending(self) -> np.ndarray:
        """bool (n_states,): accepting, but held back by a lookahead until the next byte."""
        return (self.label >= 0) & self.blocked

    @classmethod
    def build(cls, name: str, trans: np.ndarray, label: np.ndarray, block: np.ndarray | None = None
              ) -> TerminalAutomaton:
        """From a DFA with -1 for missing transitions (and an optional block table);
        adds shadow states, the dead sink and `live`."""
        from ..._native import core

        blk = None if block is None else np.ascontiguousarray(block, dtype=bool).view(np.uint8)
        m, full, lab, live, blk, blocked, shadow = core().terminal_tables(
            np.ascontiguousarray(trans, dtype=np.int32), np.ascontiguousarray(label, dtype=np.int32), blk)
        return cls(name, full.reshape(m + 1, 256), lab, live.view(bool), blk.view(bool).reshape(m + 1, 256),
                   blocked.view(bool), shadow)

    @classmethod
    def guard(cls, blocked_bytes: np.ndarray) -> TerminalAutomaton:
        """A run that "matches" (kills its hypothesis) iff the next byte is in
        `blocked_bytes`: how a lexeme ending under a trailing lookahead is checked."""
        trans = np.full((2, 256), -1, dtype=np.int32)
        trans[0, np.asarray(blocked_bytes, dtype=bool)] = 1
        return cls.build("<lookahead>", trans, np.array([-1, 0], dtype=np.int32))


@dataclass
class LexerSpec:
    """Everything the lexer needs: terminal automata in lark's order, label names,
    which labels are ignored, and the first-byte competitor table.

    ``groups`` (one int per terminal; None: all in one group, lark's rule): terminals compete
    only with the terminals of their own group. A terminal alone in its group is lexed as its
    own longest match, whatever other terminals match: a front end whose parser tells the
    terminals apart (JSON Schema: a value position admits one class) needs no competition
    there, and no run of another terminal beside each of its lexemes."""

    automata: list[TerminalAutomaton]
    labels: list[str]
    ignored: frozenset[int]
    indent_label: int | None = None  # the indenter's NEWLINE label, whose value it reads
    tab_len: int = 8
    groups: Sequence[int] | None = None

    def __post_init__(self) -> None:
        k = self.n_terminals = len(self.automata)
        autos = list(self.automata)
        # the terminals' per-state arrays end to end (state s of terminal i at off[i] + s)
        off = np.zeros(k + 1, dtype=np.int64)
        np.cumsum([a.label.shape[0] for a in autos], out=off[1:])
        label_all = np.concatenate([a.label for a in autos]) if k else np.zeros(0, np.int32)
        blocked_all = np.concatenate([a.blocked for a in autos]) if k else np.zeros(0, bool)
        live_all = np.concatenate([a.live for a in autos]) if k else np.zeros(0, bool)
        # Guard runs for lexemes that end under a trailing lookahead; they follow the
        # terminals in `automata` and never start a lexeme.
        self.guard_of: dict[tuple[int, int], int] = {}
        rows: dict[bytes, int] = {}
        pending = np.flatnonzero((label_all >= 0) & blocked_all)
        for g, i in zip(pending.tolist(), (np.searchsorted(off, pending, side="right") - 1).tolist()):
            a, st = autos[i], g - int(off[i])
            key = a.block[st].tobytes()
            if key not in rows:
                rows[key] = len(self.automata)
                self.automata.append(TerminalAutomaton.guard(a.block[st]))
            self.guard_of[(i, st)] = rows[key]
        self.indent_owner: int | None = None
        if self.indent_label is not None:
            hits = np.flatnonzero(label_all == self.indent_label)
            owners = sorted(set((np.searchsorted(off, hits, side="right") - 1).tolist()))
            owners += [i for i in range(k, len(self.automata)) if (self.automata[i].label == self.indent_label).any()]
            if len(owners) != 1:
                raise ValueError(f"the indenter's NEWLINE must be one terminal, found {owners}")
            self.indent_owner = owners[0]
        # first[i][b]: owner i's state after first byte b (dead if it cannot start so)
        self.first = np.stack([a.trans[0] for a in autos]) if k else np.zeros((0, 256), np.int32)
        # For owner i starting with byte b, the competitors are the terminals j < i of its group
        # still running after b, unless one of them already accepts (lark would pick it): as
        # arrays over (j, b), `first_kills` (j accepts on b) and `first_runs` (j runs on).
        first_all = self.first + off[:k, None]
        label0, blocked0, live0 = label_all[first_all], blocked_all[first_all], live_all[first_all]
        self.first_kills = (label0 >= 0) & ~blocked0
        self.first_runs = live0 | (label0 >= 0)
        self.group = np.zeros(k, np.int64) if self.groups is None else np.asarray(self.groups, dtype=np.int64)
        if self.group.shape != (k,):
            raise ValueError(f"groups has {self.group.shape[0]} entries for {k} terminals")
        # per group, its terminals (ascending); per owner and byte, the first terminal of its group
        # that accepts on the byte (k: none): owners after it never start on it
        self.members = [np.flatnonzero(self.group == g_) for g_ in np.unique(self.group)]
        self.first_killer = np.full((k, 256), k, dtype=np.int64)
        for idx in self.members:
            kills = self.first_kills[idx]
            self.first_killer[idx] = np.where(kills.any(axis=0), idx[kills.argmax(axis=0)], k)[None, :]
        dead = (off[1:] - off[:-1] - 1).astype(np.int32)  # each terminal's sink, its last state
        bs, js = np.nonzero((self.first != dead[:, None]).T)  # byte-major, terminals ascending
        bounds = [0, *itertools.accumulate(np.bincount(bs, minlength=256).tolist())]
        js_list = js.tolist()
        self.starters: list[list[int]] = [js_list[bounds[b]:bounds[b + 1]] for b in range(256)]

    @functools.cached_property
    def competitors(self) -> list[list[tuple[tuple[int, int], ...] | None]]:
        """``competitors[i][b]``: the (terminal, state) runs of the terminals j < i of i's group
        still running after first byte b, or None if one of them already accepts."""
        out: list[list] = [[] for _ in range(self.n_terminals)]
        first, first_runs, killer = self.first.tolist(), self.first_runs.tolist(), self.first_killer.tolist()
        for idx in self.members:
            members = idx.tolist()
            for b in range(256):
                runs = [(j, first[j][b]) for j in members if first_runs[j][b]]
                n = 0  # runs among the group's terminals before i
                for i in members:
                    out[i].append(None if killer[i][b] < i else tuple(runs[:n]))
                    n += first_runs[i][b]
        return out

    def competitor_arrays(self, off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:attr:`competitors` as flat arrays with global states (``off``: each terminal's
        first global state): (none flag per owner * 256 + byte, CSR offsets, runs sorted)."""
        k = self.n_terminals
        none = (self.first_killer < np.arange(k)[:, None]).reshape(-1)  # (k * 256,)
        if len(self.members) <= 1:  # one group (lark's rule): vectorised
            cum = np.cumsum(self.first_runs, axis=0) - self.first_runs  # (k, 256): runs among j < i
            lengths = np.where(none, 0, cum.reshape(-1)).astype(np.int64)
            offs = np.zeros(k * 256 + 1, dtype=np.int64)
            np.cumsum(lengths, out=offs[1:])
            # per byte, the global states of the running terminals in order of j (so sorted)
            bs, js = np.nonzero(self.first_runs.T)  # byte-major (b, j) pairs, j ascending per byte
            glob = (np.asarray(off[:k], dtype=np.int64)[js] + self.first[js, bs]).astype(np.int32)
            base = np.zeros(257, dtype=np.int64)
            np.cumsum(np.bincount(bs, minlength=256), out=base[1:])
            b_of = np.tile(np.arange(256), k)
            start = np.repeat(base[b_of] - offs[:-1], lengths)
            data = glob[start + np.arange(int(offs[-1]))] if offs[-1] else np.zeros(0, np.int32)
            return none.astype(np.uint8), offs, data.astype(np.int32)
        offs = np.zeros(k * 256 + 1, dtype=np.int64)
        data: list[int] = []
        comp = self.competitors
        for i in range(k):
            for b in range(256):
                runs = comp[i][b]
                if runs:
                    data.extend(int(off[j]) + s for j, s in runs)
                offs[i * 256 + b + 1] = len(data)
        return none.astype(np.uint8), offs, np.asarray(data, dtype=np.int32)


@dataclass(frozen=True)
class Config:
    owner: int
    state: int
    cons: tuple[tuple[int, int], ...]  # sorted (terminal, state) runs


class ConfigTable:
    """Interning of configs to dense ints."""

    def __init__(self) -> None:
        self.configs: list[Config] = []
        self._ids: dict[Config, int] = {}

    def id(self, cfg: Config) -> int:
        got = self._ids.get(cfg)
        if got is None:
            got = self._ids[cfg] = len(self.configs)
            self.configs.append(cfg)
        return got

    def __getitem__(self, i: int) -> Config:
        return self.configs[i]

    def __len__(self) -> int:
        return len(self.configs)


class Lexer:
    """Scalar reference semantics over a :class:`LexerSpec`."""

    def __init__(self, spec: LexerSpec, table: ConfigTable | None = None):
        self.spec = spec
        self.table = table or ConfigTable()
        self.initial = self.table.id(Config(BOUNDARY, 0, ()))
        self._viable: dict[int, frozenset[int]] = {}
        self._entered: dict[int, tuple[int, ...] | None] = {}
        self._viable_known: dict[Config, frozenset[int]] = {}  # precomputed (see prime_viable)
        self._entered_known: dict[Config, tuple[int, ...] | None] = {}  # precomputed (see prime_entered)

    def prime_viable(self, viable: dict[Config, frozenset[int]]) -> None:
        """Take :meth:`viable_labels` answers computed for many configs at once (by
        :meth:`~cad_outlines.engine.reference.store_builder.ByteAutomaton.viable_labels`)."""
        self._viable_known.update(viable)

    def use_table(self, table: ConfigTable) -> None:
        """Number configurations as `table` does (a store built or loaded with its own
        numbering; its configuration 0 is the initial one); answers cached by id are dropped."""
        self.table, self.initial = table, 0
        self._viable.clear()
        self._entered.clear()

    def prime_entered(self, entered: dict[Config, tuple[int, ...] | None]) -> None:
        """Take :meth:`entered` answers computed for many configs at once (by the native byte
        automaton: :meth:`~cad_outlines.engine.store.native_store.LexerGraph.entered`)."""
        self._entered_known.update(entered)

    # -- one byte -------------------------------------------------------------------
    def _advance_cons(self, cons: Sequence[tuple[int, int]], b: int) -> tuple[tuple[int, int], ...] | None:
        """Constraint runs after byte `b`, or None if one of them matches: it reached an
        accepting state, or it sat in a lookahead-blocked accepting state and `b` does
        not block it."""
        autos = self.spec.automata
        out = []
        for j, u in cons:
            a = autos[j]
            if a.pending[u] and not a.block[u, b]:  # a match held back by a lookahead, confirmed by b
                return None
            v = int(a.trans[u, b])
            if a.label[v] >= 0 and not a.blocked[v]:
                return None
            if a.live[v] or a.label[v] >= 0:
                out.append((j, v))
        return tuple(out)

    def step(self, cfg: Config, b: int) -> list[tuple[Config, int | None]]:
        """Successors of `cfg` on byte `b`: (config, label ended by this byte or None).
        Ending a lexeme yields a BOUNDARY config; continuing yields the owner's config."""
        spec = self.spec
        out: list[tuple[Config, int | None]] = []
        if cfg.owner == BOUNDARY:
            base = self._advance_cons(cfg.cons, b)
            if base is None:
                return out
            for i in spec.starters[b]:
                comp = spec.competitors[i][b]
                if comp is None:
                    continue
                s = int(spec.first[i, b])
                out.extend(self._after(i, s, tuple(sorted(set(base) | set(comp)))))
            return out
        a = spec.automata[cfg.owner]
        s = int(a.trans[cfg.state, b])
        if s == a.dead:
            return out
        cons = self._advance_cons(cfg.cons, b)
        if cons is None:
            return out
        return self._after(cfg.owner, s, cons)

    def _after(self, i: int, s: int, cons: tuple[tuple[int, int], ...]) -> list[tuple[Config, int | None]]:
        a = self.spec.automata[i]
        out: list[tuple[Config, int | None]] = []
        if a.live[s]:
            out.append((Config(i, s, cons), None))
        lab = int(a.label[s])
        if lab >= 0:
            out.append((Config(BOUNDARY, 0, self.ended_cons(i, s, cons)), lab))
        return out

    def ended_cons(self, i: int, s: int, cons: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        """Constraints after owner i's lexeme ends in state s: it must not match longer,
        and a trailing lookahead must not block the byte after it."""
        a = self.spec.automata[i]
        extra = []
        if a.live[s]:
            extra.append((i, int(a.shadow[s])))
        guard = self.spec.guard_of.get((i, s))
        if guard is not None:
            extra.append((guard, 0))
        return tuple(sorted(set(cons) | set(extra)))

    def viable_labels(self, cfg_id: int) -> frozenset[int]:
        """Labels the current lexeme can still end with (for BOUNDARY: empty). A label
        is viable if some continuation reaches it while no constraint run accepts."""
        got = self._viable.get(cfg_id)
        if got is not None:
            return got
        cfg = self.table[cfg_id]
        got = self._viable_known.get(cfg)
        if got is not None:
            self._viable[cfg_id] = got
            return got
        labels: set[int] = set()
        if cfg.owner != BOUNDARY:
            a = self.spec.automata[cfg.owner]
            seen = {(cfg.state, cfg.cons)}
            todo = [(cfg.state, cfg.cons)]
            while todo:
                s, cons = todo.pop()
                for b in range(256):
                    t = int(a.trans[s, b])
                    if t == a.dead:
                        continue
                    c2 = self._advance_cons(cons, b)
                    if c2 is None:
                        continue
                    if a.label[t] >= 0 and int(a.label[t]) not in labels and self._can_end(cfg.owner, t, c2):
                        labels.add(int(a.label[t]))
                    if a.live[t] and (t, c2) not in seen:
                        seen.add((t, c2))
                        todo.append((t, c2))
        got = self._viable[cfg_id] = frozenset(labels)
        return got

    def _can_end(self, i: int, t: int, cons: tuple[tuple[int, int], ...]) -> bool:
        """Can owner i's lexeme end in state t: at the end of the text, or before some
        byte that no constraint (its own lookahead and longer match included) rejects?"""
        autos = self.spec.automata
        if not any(autos[j].pending[u] for j, u in cons):
            return True
        ended = self.ended_cons(i, t, cons)
        return any(self._advance_cons(ended, b) is not None for b in range(256))

    def entered(self, cfg_id: int) -> tuple[int, ...] | None:
        """The mask-store form of :meth:`viable_labels`: sorted labels with -1 for an
        ignored one, ``()`` at a boundary, None if the lexeme cannot end validly."""
        if cfg_id in self._entered:
            return self._entered[cfg_id]
        cfg = self.table[cfg_id]
        if cfg in self._entered_known:
            got = self._entered[cfg_id] = self._entered_known[cfg]
            return got
        if cfg.owner == BOUNDARY:
            got: tuple[int, ...] | None = ()
        else:
            viable = self.viable_labels(cfg_id)
            got = tuple(sorted(-1 if lab in self.spec.ignored else lab for lab in viable)) if viable else None
        self._entered[cfg_id] = got
        return got

    def final_labels(self, cfg_id: int) -> list[int | None] | None:
        """How the text may end in this config: [] at a boundary (nothing pending),
        [label] if the current lexeme can end right here (None if it is ignored), or
        None if the text cannot end here."""
        cfg = self.table[cfg_id]
        autos = self.spec.automata
        if any(autos[j].pending[u] for j, u in cfg.cons):
            return None  # a match held back by a lookahead is confirmed by the end of the text
        if cfg.owner == BOUNDARY:
            return []
        lab = int(autos[cfg.owner].label[cfg.state])
        if lab < 0:
            return None
        return [None] if lab in self.spec.ignored else [lab]


def lexer_spec_from_lark(lk: lark.Lark) -> LexerSpec:
    """The :class:`~.lexer.LexerSpec` of a grammar loaded by lark: the scanner terminals in
    lark's order, each with per-state labels after the "unless" rule and its ``block``
    table; the ignored labels; the indenter's NEWLINE label if lark has a postlexer with
    ``NL_type`` (``PythonIndenter``).

    Whether a lexeme is dropped is decided by the terminal that matched it, before the "unless"
    retyping (lark's ``BasicLexer.next_token``): an ignored terminal keeps its own label (it is
    dropped whatever its type), and a terminal that is not ignored, retyped to an ignored string
    terminal, passes that type to the parser. A label is therefore a (type, dropped) pair: the same
    name can be two labels, one dropped and one not."""
    ts = compile_terminals(lk)
    labels: list[str] = []
    label_ids: dict[tuple[str, bool], int] = {}
    automata = []
    for name in ts.scanner:
        dropped = ts[name].ignored
        trans, labs, block = ts.labeled(name, retype=not dropped)
        ids = []
        for lab in labs:
            if lab is not None and (lab, dropped) not in label_ids:
                label_ids[lab, dropped] = len(labels)
                labels.append(lab)
            ids.append(-1 if lab is None else label_ids[lab, dropped])
        automata.append(TerminalAutomaton.build(name, trans, np.asarray(ids, dtype=np.int32), block))
    ignored = frozenset(i for (_, dropped), i in label_ids.items() if dropped)
    postlex = lk.options.postlex
    nl_type = getattr(postlex, "NL_type", None)
    if nl_type is None:
        return LexerSpec(automata, labels, ignored)
    if (nl_type, False) not in label_ids:
        raise GrammarCompileError(
            nl_type, f"the grammar is read with an indenter ({type(postlex).__name__}: a grammar that %declares "
            f"_INDENT _DEDENT gets lark's PythonIndenter unless postlex=None), which finds indentation in "
            f"{nl_type} lexemes, but the grammar has no terminal {nl_type}; define it (python.lark's: "
            f"`_NEWLINE: ( /\\r?\\n[\\t ]*/ | COMMENT )+`) or compile with postlex=None")
    return LexerSpec(automata, labels, ignored, indent_label=label_ids[nl_type, False],
                     tab_len=getattr(postlex, "tab_len", 8))


def lexer_spec_from_dfas(terminals, groups: Sequence[int] | None = None) -> LexerSpec:
    """The :class:`LexerSpec` of terminals given as byte DFAs in the lexer's order (``(name, dfa)``
    pairs, each DFA with ``trans``, ``accept`` and an optional ``block``; no "unless" retyping, nothing
    ignored): how a front end that builds its own automata (JSON Schema) hands them over. Each
    terminal's automaton is built once per DFA object (cached) and relabelled per grammar. `groups`:
    which terminals compete (:class:`LexerSpec`)."""
    automata = []
    labels = []
    for i, (name, dfa) in enumerate(terminals):
        base = _AUTOMATA.get(id(dfa))
        if base is None or base[0] is not dfa:
            if len(_AUTOMATA) > 50_000:
                _AUTOMATA.clear()
            label = np.where(dfa.accept, 0, -1).astype(np.int32)
            base = _AUTOMATA[id(dfa)] = (dfa, TerminalAutomaton.build(name, dfa.trans, label, dfa.block))
        auto = base[1]
        automata.append(dataclasses.replace(auto, name=name, label=np.where(auto.label >= 0, i, -1).astype(np.int32)))
        labels.append(name)
    return LexerSpec(automata, labels, frozenset(), groups=groups)


_AUTOMATA: dict[int, tuple] = {}  # id(ByteDFA) -> (the DFA, its TerminalAutomaton with label 0)
