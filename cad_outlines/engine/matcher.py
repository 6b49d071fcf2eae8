"""The matcher: the one runtime surface both generators use, on the native core.

A thin Python shell over ``cad_outlines._native`` (C++): every decode-step operation
(mask, advance, validate, rollback, fork, EOS) runs natively over the grammar's flat
arrays (:mod:`.flat_grammar`); this layer only checks arguments, raises the library's
errors and shapes results. ``fill_next_token_bitmask_batch`` computes a whole batch
with the GIL released on a thread pool. :mod:`.reference_matcher` is the pure-Python
test reference it must agree with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidTokenError, MatcherLimitError, TokenError  # noqa: F401
from ..limits import MATCHER_LIMITS, Limits, matcher_limit_error
from .token_ids import check_token_id, check_token_ids

if TYPE_CHECKING:
    from .compiled_grammar import CompiledGrammar

__all__ = ["Matcher", "InvalidTokenError", "fill_next_token_bitmask_batch", "allocate_token_bitmask",
           "unpack_bitmask", "forced_tokens"]


def allocate_token_bitmask(batch: int, vocab_size: int) -> np.ndarray:
    """An int32 bitmask of shape (batch, ceil(vocab_size / 32)), every bit set (-1: every token
    allowed): llguidance's layout and initial value, so a row no matcher fills masks nothing."""
    return np.full((batch, (vocab_size + 31) // 32), -1, dtype=np.int32)


def unpack_bitmask(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Bool array(s) over the vocabulary from packed int32 words (last axis)."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab_size].astype(bool)


class Matcher:
    """Constrained-decoding state for one sequence.

    ``fill_next_token_bitmask`` / ``allowed_mask`` give the legal next tokens;
    ``advance`` / ``advance_many`` consume; ``validate`` checks without consuming;
    ``rollback`` undoes; ``fork`` copies; ``forced_tokens`` gives what must come next.
    EOS is legal exactly where the text so far is a complete sentence.

    Every call's work is bounded by `limits` (default: the grammar's, i.e. the compile's
    :class:`~cad_outlines.limits.Limits`): parser reductions per mask or per token, parser stack
    depth, memory. Exceeding one stops the matcher for good: that call and every later one raise
    :class:`~cad_outlines.errors.MatcherLimitError`, and :attr:`error` holds it.
    """

    __slots__ = ("grammar", "_m")

    def __init__(self, grammar: CompiledGrammar, _native=None, *, limits: Limits | None = None):
        self.grammar = grammar
        if _native is None:
            lim = limits if limits is not None else grammar.limits
            caps = [getattr(lim, name) for name in MATCHER_LIMITS]
            _native = grammar.native_module.Matcher(grammar.native, *(-1 if c is None else int(c) for c in caps))
        self._m = _native

    @property
    def error(self) -> MatcherLimitError | None:
        """Why this matcher stopped (a decode-time limit exceeded), or None while it works."""
        info = self._m.error
        return None if info is None else matcher_limit_error(*info)

    # -- queries ----------------------------------------------------------------------
    def fill_next_token_bitmask(self, out: np.ndarray) -> None:
        """Write the legal next tokens into `out` (int32 words, bit i % 32 of word
        i // 32 for token i: the layout of llguidance/xgrammar). `out` may be a row of a
        batch bitmask; words past the grammar's vocabulary are zeroed."""
        if out.dtype != np.int32 or not out.flags.c_contiguous:
            raise ValueError("bitmask must be a C-contiguous int32 array")
        ok = self._m.fill(out.reshape(-1))
        if out.size > self.grammar.native.n_words:
            out.reshape(-1)[self.grammar.native.n_words:] = 0
        if not ok:  # `out` allows only EOS
            raise self.error

    def allowed_mask(self) -> np.ndarray:
        """A fresh bool array over the model's vocabulary: True = legal next token."""
        words = np.empty(self.grammar.native.n_words, dtype=np.int32)
        if not self._m.fill(words):
            raise self.error
        return unpack_bitmask(words, self.grammar.vocab_size)

    def is_accepting(self) -> bool:
        """Whether the text so far is a complete sentence (EOS would be legal)."""
        answer = self._m.is_accepting()
        if answer < 0:
            raise self.error
        return bool(answer)

    def is_finished(self) -> bool:
        """Whether EOS has been consumed."""
        return self._m.is_finished()

    @property
    def consumed(self) -> int:
        return self._m.consumed

    @property
    def parser_checks(self) -> int:
        """Parser questions asked so far (for the analysis report)."""
        return self._m.parser_checks

    # -- moves --------------------------------------------------------------------------
    def advance(self, token: int) -> None:
        """Consume one token; raises :class:`InvalidTokenError` (changing nothing) if it
        is not legal here, ValueError if it is not a token id of the vocabulary."""
        token = check_token_id(token, self.grammar.vocab_size)
        code = self._m.advance(token)
        if code:
            if code == 3:
                raise self.error
            if code == 2:
                raise InvalidTokenError(f"token {token} after EOS")
            raise InvalidTokenError(f"token {token} ({self.grammar.token_bytes(token)!r}) is not allowed here")

    def advance_many(self, tokens: Sequence[int]) -> None:
        """Consume several tokens; validates the whole run first and changes nothing if
        any token is invalid (the error names its index)."""
        arr = check_token_ids(tokens, self.grammar.vocab_size)
        n = self._m.advance_many(arr)
        if n < 0:
            raise self.error
        if n < len(arr):
            tok = int(arr[n])
            raise InvalidTokenError(f"token {tok} ({self.grammar.token_bytes(tok)!r}) at index {n} of {len(arr)} "
                                    "is not allowed")

    def validate(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` are legal in sequence (no state change)."""
        n = self._m.validate(check_token_ids(tokens, self.grammar.vocab_size))
        if n < 0:
            raise self.error
        return n

    def rollback(self, n: int = 1) -> None:
        """Undo the last `n` consumed tokens (not out of an error: that is final)."""
        if self._m.error is not None:
            raise self.error
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 or not self._m.rollback(int(n)):
            raise ValueError(f"cannot roll back {n!r} tokens: {self.consumed} consumed")

    def fork(self) -> Matcher:
        """An independent copy (history included)."""
        return Matcher(self.grammar, self._m.copy())

    def forced_bytes(self, limit: int = 256, mask: np.ndarray | None = None) -> bytes:
        """The longest byte string every legal continuation starts with (empty where
        EOS or two different first bytes are legal). `mask`, this state's
        :meth:`allowed_mask` if the caller has it, rules most states out at once.

        Legal prefixes are prefix-closed, so byte b is legal next iff some allowed token
        starts with b; the walk advances a fork by single-byte tokens."""
        g = self.grammar
        if self.is_finished():
            return b""
        out = bytearray()
        probe: Matcher | None = None
        while len(out) < limit:
            m = mask if probe is None and mask is not None else (probe or self).allowed_mask()
            if m[list(g.eos_token_ids)].any():
                break
            firsts = g.first_bytes[np.flatnonzero(m[: len(g.first_bytes)])]
            if len(firsts) == 0 or (firsts != firsts[0]).any():
                break
            b = int(firsts[0])
            tok = g.byte_token_ids[b]
            if tok < 0:
                break
            probe = probe or self.fork()
            probe.advance(int(tok))
            out.append(b)
        return bytes(out)

    def forced_tokens(self, encode, limit: int = 256, mask: np.ndarray | None = None) -> list[int]:
        """Tokens to fast-forward (see :func:`forced_tokens`)."""
        return forced_tokens(self, encode, limit, mask)


def forced_tokens(matcher, encode, limit: int = 256, mask: np.ndarray | None = None) -> list[int]:
    """Tokens to fast-forward from `matcher`'s state: `encode` (text -> token ids, no
    special tokens) of its ``forced_bytes``, without a last token that a longer legal
    token could replace (so the model keeps its own tokenization at the boundary), and
    only as far as the matcher accepts them."""
    data = matcher.forced_bytes(limit, mask)
    if not data:
        return []
    tokens = list(encode(data.decode("utf-8", errors="strict")))
    tokens = tokens[: matcher.validate(tokens)]
    if tokens:
        probe = matcher.fork()
        probe.advance_many(tokens[:-1])
        last = matcher.grammar.token_bytes(tokens[-1])
        allowed = probe.allowed_mask()
        if any(allowed[t] for t in matcher.grammar.tokens_extending(last)):
            tokens.pop()
    return tokens


def fill_next_token_bitmask_batch(matchers: Sequence[Matcher | None], bitmask: np.ndarray,
                                  rows: Sequence[int] | None = None) -> None:
    """Fill row ``rows[i]`` (default i) of `bitmask` with ``matchers[i]``'s mask, the whole
    batch in one native call on a thread pool sized to the cores, the GIL released.
    ``None`` entries are skipped: their rows are left as they are (all-allowed in a fresh
    :func:`allocate_token_bitmask`, as llguidance leaves a row no matcher fills).

    A matcher that a decode-time limit stops (now or before) does not stop the batch: its
    row allows only EOS, every other row is filled, and then :class:`MatcherLimitError` is
    raised, its ``indices`` naming every such matcher's position in `matchers`."""
    if bitmask.dtype != np.int32 or bitmask.ndim != 2 or not bitmask.flags.c_contiguous:
        raise ValueError("bitmask must be a C-contiguous 2-D int32 array (batch, words)")
    if rows is not None:
        rows = list(rows)
        if len(rows) != len(matchers):
            raise ValueError(f"{len(rows)} rows for {len(matchers)} matchers")
    if None in matchers:
        where = [i for i, m in enumerate(matchers) if m is not None]
    else:
        where = range(len(matchers))
    natives = [matchers[i]._m for i in where]
    if not natives:
        return
    failed = _core().fill_batch(natives, bitmask, list(where) if rows is None else [int(rows[i]) for i in where])
    if failed:
        indices = [where[k] for k in failed]
        err = matchers[indices[0]].error
        err.indices = indices
        if len(indices) > 1:
            err.args = (f"{err.args[0]} (matcher {indices[0]}; {len(indices)} matchers of the batch stopped: "
                        f"{indices[:20]})",)
        raise err


def _core():
    from .._native import core

    return core()
