"""Prompt-lookup drafting for speculative gen bodies: n-gram matches of the tokens written so far
in the document's tokens and in the written tokens."""

from __future__ import annotations

__all__ = ["NgramLookup"]


class NgramLookup:
    """Prompt-lookup drafts: the longest suffix n-gram (n <= `max_n`) of the written
    tokens, looked up in `source` (e.g. the document's tokens) and then in the written
    tokens themselves; the leftmost occurrence with a continuation gives the draft (as
    transformers' ``PromptLookupCandidateGenerator`` does over its input)."""

    def __init__(self, source: list[int], max_n: int = 3) -> None:
        self.max_n = max_n
        self.source = list(source)
        self.written: list[int] = []
        self._index: list[dict[tuple[int, ...], int]] = [{}, {}]
        for end in range(1, len(self.source) + 1):
            self._add(0, self.source, end)

    def _add(self, which: int, seq: list[int], end: int) -> None:
        index = self._index[which]
        for n in range(1, min(self.max_n, end) + 1):
            index.setdefault(tuple(seq[end - n : end]), end - n)

    def extend(self, tokens: list[int]) -> None:
        """Record `tokens` as written (they become lookup keys and continuations)."""
        for t in tokens:
            self.written.append(t)
            self._add(1, self.written, len(self.written))

    def propose(self, limit: int) -> list[int]:
        """Up to `limit` draft tokens continuing the written tokens (empty if no match)."""
        if limit <= 0:
            return []
        for n in range(min(self.max_n, len(self.written)), 0, -1):
            key = tuple(self.written[-n:])
            for index, seq in zip(self._index, (self.source, self.written)):
                start = index.get(key)
                if start is not None and start + n < len(seq):
                    return seq[start + n : start + n + limit]
        return []
