"""The pure-Python matcher: a TEST REFERENCE for the native core, not a runtime path.

:class:`~cad_outlines.engine.matcher.Matcher` (C++, engine/store/flat_grammar.py arrays) is
what the generators use. This module keeps the original algorithm over the Python
objects (lexer, mask store, hash-consed parser) so tests and studies can check that the
native masks and moves are identical, position by position.

State = the incremental parser (terminals every live lexer configuration agrees on)
plus the live configurations, each with the labels it has completed beyond that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..compiled_grammar import CompiledGrammar
from ..store.lexer import INDENT_BASE, decode_indent, encode_indent
from ..matcher import InvalidTokenError, forced_tokens
from ..frontend.parse_tables import END
from .lexer_run import run_lexer
from .parser import IncrementalParser
from .row_trie import row_trie

__all__ = ["ReferenceMatcher"]


# ((config id, labels completed beyond the parser, indentation of a NEWLINE in progress), ...)
Live = tuple[tuple[int, tuple[int, ...], int], ...]


class ReferenceMatcher:
    """Constrained-decoding state for one sequence.

    ``fill_next_token_bitmask`` / ``allowed_mask`` give the legal next tokens;
    ``advance`` / ``advance_many`` consume; ``rollback`` undoes; ``fork`` copies.
    EOS is legal exactly where the text so far is a complete sentence.
    """

    def __init__(self, grammar: CompiledGrammar):
        self.grammar = grammar.load_objects()  # the Python objects it walks (built here if only flat arrays)
        if grammar.tables.guards is not None:
            raise NotImplementedError("the reference parser does not run ObjectGuards (JSON Schema objects whose "
                                      "required names come in any order); the native matcher does")
        self.parser = IncrementalParser(grammar.tables, grammar.indenter)
        self.live: Live = ((grammar.lexer.initial, (), 0),)
        self.finished = False
        self._history: list[tuple[IncrementalParser, Live, bool]] = []
        self.parser_checks = 0

    # -- queries ----------------------------------------------------------------------
    def _names(self, labels: Sequence[int]) -> tuple:
        """Parser items for labels: names, or (NEWLINE name, indentation)."""
        names = self.grammar.label_names
        out = []
        for x in labels:
            if x >= INDENT_BASE:
                out.append((names[self.grammar.lexer.spec.indent_label], decode_indent(x)[0]))
            else:
                out.append(names[x])
        return tuple(out)

    @staticmethod
    def _absolute(emitted: tuple[int, ...], acc: int) -> tuple[int, ...] | None:
        """Resolve a NEWLINE indentation relative to the lexeme carried in (only the
        first emitted label can be relative); None if it cannot be read."""
        if emitted and emitted[0] >= INDENT_BASE:
            value, absolute = decode_indent(emitted[0])
            if not absolute:
                if acc < 0:  # no line break before: lark's Indenter cannot read it
                    return None
                return (encode_indent(acc + value, True),) + emitted[1:]
        return emitted

    def _passes(self, parser: IncrementalParser, pending: tuple[int, ...], emitted: tuple[int, ...],
                entered: tuple[int, ...], memo: dict) -> bool:
        key = (pending + emitted, entered)
        got = memo.get(key)
        if got is None:
            self.parser_checks += 1
            seq = self._names(pending + emitted)
            if not entered:
                got = parser.accepts(seq)
            else:
                nl = self.grammar.lexer.spec.indent_label
                got = any(
                    parser.accepts(seq) if lab < 0
                    else parser.accepts_newline_after(seq) if lab == nl
                    else parser.accepts(seq + (self.grammar.label_names[lab],))
                    for lab in entered
                )
            memo[key] = got
        return got

    def allowed_mask(self) -> np.ndarray:
        """A fresh bool array over the model's vocabulary: True = legal next token."""
        g = self.grammar
        mask = np.zeros(g.vocab_size, dtype=bool)
        if self.finished:
            return mask
        passing: set[int] = set()
        for cfg, pending, acc in self.live:
            state = self.parser._run(self._names(pending))
            if state is not None:
                self._walk(row_trie(g, cfg), state, acc, passing)
        g.store.union_into(mask, passing)
        mask[g.never_allowed] = False
        if self._eos_allowed():
            mask[list(g.eos_token_ids)] = True
        return mask

    def _walk(self, root, state, acc: int, passing: set[int]) -> None:
        """Add the sets of every row of a config's row trie whose labels the parser
        accepts from `state`: each shared prefix is parsed once, failing ones pruned."""
        parser, names = self.parser, self.grammar.label_names
        nl_label = self.grammar.lexer.spec.indent_label
        entered_memo: dict = {}
        todo = [(root, state, True)]
        while todo:
            node, st, first = todo.pop()
            for entered, sid in node.rows:
                if sid in passing:
                    continue
                if not entered:
                    passing.add(sid)  # nothing entered: the labels on the path decided it
                    continue
                key = (st, entered)
                ok = entered_memo.get(key)
                if ok is None:
                    ok = entered_memo[key] = any(
                        lab < 0
                        or (parser.accepts_newline_after((), st) if lab == nl_label else parser.step(st, names[lab]) is not None)
                        for lab in entered
                    )
                    self.parser_checks += 1
                if ok:
                    passing.add(sid)
            for elem, child in node.children.items():
                if elem >= INDENT_BASE:
                    value, absolute = decode_indent(elem)
                    if not absolute and first and acc < 0:
                        continue  # no line break in this NEWLINE: lark's Indenter cannot read it
                    item = (names[nl_label], value if absolute or not first else acc + value)
                else:
                    item = names[elem]
                self.parser_checks += 1
                nxt = parser.step(st, item)
                if nxt is not None:
                    todo.append((child, nxt, False))

    def fill_next_token_bitmask(self, out: np.ndarray) -> None:
        """Write the legal next tokens into `out` as packed bits: int32 words, bit
        (i % 32) of word i // 32 set for token i (the layout of llguidance/xgrammar)."""
        mask = self.allowed_mask()
        words = out.shape[-1]
        padded = np.zeros(words * 32, dtype=bool)
        padded[: len(mask)] = mask
        out[...] = np.packbits(padded, bitorder="little").view("<u4").view(np.int32)

    def _eos_allowed(self) -> bool:
        return self._eos_ok(self.parser, self.live)

    def _eos_ok(self, parser: IncrementalParser, live: Live) -> bool:
        lexer = self.grammar.lexer
        nl_label = lexer.spec.indent_label
        for cfg, pending, acc in live:
            final = lexer.final_labels(cfg)
            if final is None:
                continue
            if nl_label in final and acc < 0:
                # a NEWLINE with no line break (a comment ending the text): lark's Indenter drops it inside
                # brackets before reading its indentation, and fails on it outside them
                state = parser._run(self._names(pending))
                if state is None or state[2] == 0:
                    continue
                final = [x for x in final if x != nl_label]
            tail = tuple(encode_indent(acc, True) if x == nl_label else x for x in final if x is not None)
            if parser.accepts(self._names(pending + tail) + (END,)):
                return True
        return False

    def is_accepting(self) -> bool:
        """Whether the text so far is a complete sentence (EOS would be legal)."""
        return not self.finished and self._eos_allowed()

    def is_finished(self) -> bool:
        """Whether EOS has been consumed."""
        return self.finished

    # -- moves --------------------------------------------------------------------------
    def _step(self, parser: IncrementalParser, live: Live, token: int) -> tuple[IncrementalParser, Live, bool] | None:
        g = self.grammar
        if token in g.eos_token_ids:
            return (parser, (), True) if self._eos_ok(parser, live) else None
        return self._step_bytes(parser, live, g.token_bytes(token))

    def _step_bytes(self, parser: IncrementalParser, live: Live, data: bytes) -> tuple[IncrementalParser, Live, bool] | None:
        g = self.grammar
        if not data:
            return None
        memo: dict = {}
        new_live: dict[tuple[int, tuple[int, ...], int], None] = {}
        for cfg, pending, acc in live:
            for end, emitted, acc2 in run_lexer(g.lexer, cfg, data, acc):
                entered = g.lexer.entered(end)
                if entered is None or not self._passes(parser, pending, emitted, entered, memo):
                    continue
                new_live[(end, pending + emitted, acc2)] = None
        if not new_live:
            return None
        # commit what every live configuration agrees on
        pendings = [p for _, p, _ in new_live]
        k = 0
        while all(len(p) > k for p in pendings) and len({p[k] for p in pendings}) == 1:
            k += 1
        if k:
            parser = parser.fork()
            parser.consume(self._names(pendings[0][:k]))
        return parser, tuple((c, p[k:], a) for c, p, a in new_live), False

    def advance(self, token: int) -> None:
        """Consume one token; raises :class:`InvalidTokenError` (changing nothing) if it
        is not legal here."""
        if self.finished:
            raise InvalidTokenError(f"token {token} after EOS")
        got = self._step(self.parser, self.live, token)
        if got is None:
            raise InvalidTokenError(f"token {token} ({self.grammar.token_bytes(token)!r}) is not allowed here")
        self._history.append((self.parser, self.live, self.finished))
        self.parser, self.live, self.finished = got

    def advance_many(self, tokens: Sequence[int]) -> None:
        """Consume several tokens; validates the whole run first and changes nothing if
        any token is invalid (the error names its index)."""
        parser, live, finished = self.parser, self.live, self.finished
        states = []
        for n, tok in enumerate(tokens):
            got = None if finished else self._step(parser, live, tok)
            if got is None:
                raise InvalidTokenError(f"token {tok} at index {n} of {len(tokens)} is not allowed")
            states.append((parser, live, finished))
            parser, live, finished = got
        self._history.extend(states)
        self.parser, self.live, self.finished = parser, live, finished

    def validate(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` are legal in sequence (no state change)."""
        parser, live, finished = self.parser, self.live, self.finished
        for n, tok in enumerate(tokens):
            got = None if finished else self._step(parser, live, tok)
            if got is None:
                return n
            parser, live, finished = got
        return len(tokens)

    def rollback(self, n: int = 1) -> None:
        """Undo the last `n` consumed tokens."""
        if n < 0 or n > len(self._history):
            raise ValueError(f"cannot roll back {n} tokens: {len(self._history)} consumed")
        if n:
            self.parser, self.live, self.finished = self._history[-n]
            del self._history[-n:]

    def fork(self) -> ReferenceMatcher:
        other = ReferenceMatcher.__new__(ReferenceMatcher)
        other.grammar, other.parser, other.live = self.grammar, self.parser, self.live
        other.finished, other._history, other.parser_checks = self.finished, list(self._history), 0
        return other

    def forced_bytes(self, limit: int = 256, mask: np.ndarray | None = None) -> bytes:
        """The longest byte string every legal continuation starts with (empty where
        EOS or two different bytes are legal). `mask`, this state's
        :meth:`allowed_mask` if the caller has it, rules most states out at once."""
        parser, live = self.parser, self.live
        out = bytearray()
        if self.finished:
            return b""
        if mask is not None:
            firsts = self.grammar.first_bytes[np.flatnonzero(mask[: len(self.grammar.first_bytes)])]
            if len(firsts) == 0 or (firsts != firsts[0]).any():
                return b""
        while len(out) < limit:
            probe = ReferenceMatcher.__new__(ReferenceMatcher)
            probe.grammar, probe.parser, probe.live, probe.finished = self.grammar, parser, live, False
            probe.parser_checks = 0
            if probe._eos_allowed():
                break
            nxt = None
            for b in range(256):
                got = self._step_bytes(parser, live, bytes([b]))
                if got is not None:
                    if nxt is not None:
                        nxt = None
                        break
                    nxt = (b, got)
            if nxt is None:
                break
            out.append(nxt[0])
            parser, live, _ = nxt[1]
        return bytes(out)

    def forced_tokens(self, encode, limit: int = 256, mask: np.ndarray | None = None) -> list[int]:
        """Tokens to fast-forward (see :func:`~cad_outlines.engine.matcher.forced_tokens`)."""
        return forced_tokens(self, encode, limit, mask)

    @property
    def consumed(self) -> int:
        return len(self._history)
