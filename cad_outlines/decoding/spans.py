"""Line-span constraint: beyond the grammar, copy ops only name lines that exist.

The grammar allows any ``<copy lines="i-j"/>``; for a document of n lines the decode
loop also requires 1 <= i <= j <= n (and, optionally, i > the previous copy's j so spans
never go backwards). This module decides, for a candidate continuation of the program
text, whether every copy tag in it can still be completed within those bounds.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["SpanConstraint"]

_TAG = re.compile(r'<copy lines="([0-9]*)(?:(-)([0-9]*))?')
_TAG_START = '<copy lines="'


def _number_can_be(digits: str, closed: bool, lo: int, hi: int) -> bool:
    """Can `digits` (closed: nothing more will be added) be completed to a number in
    [lo, hi] without a leading zero?"""
    if lo > hi:
        return False
    if not digits:
        return not closed
    if digits[0] == "0":
        return False
    value = int(digits)
    if closed:
        return lo <= value <= hi
    width = len(str(hi))
    scale = 1
    for _ in range(len(digits), width + 1):
        # numbers that start with `digits` and have one more digit per round
        if value * scale <= hi and (value + 1) * scale - 1 >= lo:
            return True
        scale *= 10
    return False


class SpanConstraint:
    """Keeps copy spans inside a document of `n_lines` lines (and, with `monotonic`,
    moving forward)."""

    def __init__(self, n_lines: int, monotonic: bool = False):
        self.n_lines, self.monotonic = n_lines, monotonic

    def text_ok(self, text: str, last_end: int = 0) -> bool:
        """Whether every copy tag in `text` (the program text from the start of the
        current op on; the last tag may be unfinished) can still be completed validly.
        `last_end` is the end line of the copy before `text` (for `monotonic`)."""
        n = self.n_lines
        pos = 0
        while True:
            k = text.find("<c", pos)
            if k < 0:
                return True
            rest = text[k:]
            if len(rest) < len(_TAG_START) and _TAG_START.startswith(rest):
                # about to open a copy tag: some span must still be possible
                lo = last_end + 1 if self.monotonic else 1
                return lo <= n
            m = _TAG.match(text, k)
            if not m:
                return True  # the grammar decides what this is
            lo = last_end + 1 if self.monotonic else 1
            i_digits, dash, j_digits = m.group(1), m.group(2), m.group(3)
            i_closed = dash is not None or m.end() < len(text)
            if not _number_can_be(i_digits, i_closed, lo, n):
                return False
            if dash is None:
                return True
            i = int(i_digits)
            j_closed = m.end() < len(text)
            if not _number_can_be(j_digits or "", j_closed, i, n):
                return False
            if not j_closed:
                return True
            last_end = int(j_digits)
            pos = m.end()

    def filter(self, mask: np.ndarray, pending: str, token_text: list[str | None], last_end: int = 0,
               candidates: np.ndarray | None = None) -> np.ndarray:
        """A copy of `mask` without the tokens whose text would make a copy span
        impossible. `pending` is the text of the op in progress; `token_text[t]` is
        token t's text (None if it is not valid UTF-8 alone: such tokens never carry
        digits or tag characters, so they are left to the grammar)."""
        out = mask.copy()
        ids = np.flatnonzero(mask) if candidates is None else candidates[mask[candidates]]
        for t in ids:
            text = token_text[t]
            if text is not None and not self.text_ok(pending + text, last_end):
                out[t] = False
        return out
