"""Text -> token ids exactly as a decode loop continues a sequence.

One definition shared by the in-process Copy-as-Decode loop and the serving client, so
that both put the same tokens for the same text (copied lines, forced text, scripts).
"""

from __future__ import annotations

from ..engine.vocabulary import Vocabulary

__all__ = ["TokenEncoder"]


class TokenEncoder:
    """Encodes text with a tokenizer, byte-exactly against a :class:`Vocabulary`."""

    def __init__(self, tokenizer, vocab: Vocabulary):
        self.tokenizer, self.vocab = tokenizer, vocab
        self._by_bytes: dict[bytes, int] | None = None
        self._max_len = 0

    def encode(self, text: str) -> list[int]:
        """Token ids whose bytes are exactly `text`'s, as the text continues a sequence:
        the tokenizer's own encoding when it spells the text exactly, else (e.g. a
        SentencePiece tokenizer adding a word-start space) greedy longest-match over the
        vocabulary's bytes."""
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        data = text.encode("utf-8")
        if b"".join(self.vocab.token_bytes[i] for i in ids) == data:
            return ids
        return self.greedy(data)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Token ids whose bytes are exactly `data`'s: the bytes that complete a character begun
        earlier (a forced run may start inside one) greedily over the vocabulary, the rest by
        :meth:`encode`; a character cut at the end is left out (the ids cover a prefix of `data`)."""
        head = 0
        while head < len(data) and head < 3 and (data[head] & 0xC0) == 0x80:
            head += 1
        end = len(data)
        for back in range(1, min(4, end - head) + 1):
            b = data[end - back]
            if b >= 0xC0:  # a lead byte: is its character complete?
                if back < (2 if b < 0xE0 else 3 if b < 0xF0 else 4):
                    end -= back
                break
            if b < 0x80:
                break
        ids = self.greedy(data[:head]) if head else []
        if end > head:
            ids += self.encode(data[head:end].decode("utf-8"))
        return ids

    def greedy(self, data: bytes) -> list[int]:
        """Greedy longest-match tokenization of `data` over the vocabulary's bytes."""
        if self._by_bytes is None:
            self._by_bytes = {}
            for i, b in enumerate(self.vocab.token_bytes):
                if b and i not in self.vocab.special_ids:
                    self._by_bytes.setdefault(b, i)
            self._max_len = max(map(len, self._by_bytes))
        out, pos = [], 0
        while pos < len(data):
            for n in range(min(self._max_len, len(data) - pos), 0, -1):
                tok = self._by_bytes.get(data[pos : pos + n])
                if tok is not None:
                    out.append(tok)
                    pos += n
                    break
            else:
                raise ValueError(f"byte {data[pos]:#x} has no token in this vocabulary")
        return out

    def next_token(self, data: bytes, pos: int) -> int:
        """The first token of `data[pos:]` as :meth:`encode` spells it: from the start of
        the character holding byte `pos`, the token after those covering `pos` bytes
        (byte-exact, also inside a multi-byte character); else greedy longest match."""
        start = pos
        while start > 0 and pos - start < 3 and (data[start] & 0xC0) == 0x80:
            start -= 1
        try:
            ids = self.encode(data[start:].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            ids = []
        covered = start
        for t in ids:
            if covered == pos:
                return t
            covered += len(self.vocab.token_bytes[t])
            if covered > pos:
                break
        return self.greedy(data[pos:])[0]
