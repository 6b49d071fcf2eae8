"""The str_replace format's reader: JSON calls ``{"old_str": "...", "new_str": "..."}`` one a line,
whose ``old_str`` must stay a run of whole document lines that can still occur exactly once.

The old text is written JSON-escaped: the scanner decodes it byte by byte (``\\"``, ``\\\\``, ``\\/``,
``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t``, ``\\uXXXX`` outside the surrogates) and feeds the decoded
bytes to the same line matching as the line formats (:class:`~.hunk_scanners.HunkScanner`); a decoded
``"\\n"`` completes a line. ``old_str`` may end (its closing quote) after a complete line, or inside
the document's last line when that line has no newline and the text so far is all of it. Astral
characters must be written raw (a surrogate-pair escape is refused); every other character may be
written raw or escaped.

States ``(section, q, candidates, cursor, extra)``: "o" outside strings (extra: the string literals
of this object so far), "k" a key, "s" old_str's text (q: the line's decoded bytes; extra: the escape
read so far, "" for none), "f" new_str's text (extra: the escape so far).
"""

from __future__ import annotations

from bisect import bisect_left

from .hunk_scanners import NL, HunkScanner, State
from .line_index import Candidates

__all__ = ["StrReplaceScanner"]

QUOTE, BACKSLASH, BRACE = 0x22, 0x5C, 0x7B
_SIMPLE = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 8, 0x66: 12, 0x6E: NL, 0x72: 13, 0x74: 9}  # \" \\ \/ \b ...
_HEX = b"0123456789abcdefABCDEF"
_CANONICAL = {0x22: b'\\"', 0x5C: b"\\\\", NL: b"\\n", 13: b"\\r", 9: b"\\t", 8: b"\\b", 12: b"\\f"}


def _at_char_boundary(q: bytes) -> bool:
    """Whether `q` does not end inside a UTF-8 character."""
    for back in range(1, min(4, len(q)) + 1):
        b = q[-back]
        if b < 0x80:
            return back == 1
        if b >= 0xC0:  # a lead byte: complete if the character's length is `back`
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return need == back
    return True


class StrReplaceScanner(HunkScanner):
    empty_old = None

    def __init__(self, document: str):
        super().__init__(document, mark_unterminated=True)

    def initial(self) -> State:
        return ("o", None, None, 0, 0)

    # -- old_str text ------------------------------------------------------------------------------------
    def _next_chars(self, cands: Candidates, q: bytes) -> set[int]:
        """The code points that may come next in old_str's decoded text (10: the line's end)."""
        out = {NL} if cands.has_line(q) else set()
        if not _at_char_boundary(q):
            return out
        view = cands.view
        i = bisect_left(view, q)
        d = len(q)
        while i < len(view) and view[i].startswith(q):
            r = view[i]
            if len(r) > d:
                b = r[d]
                size = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
                try:
                    out.add(ord(r[d:d + size].decode("utf-8")))
                except UnicodeDecodeError:
                    pass
                nxt = r[:d + 1]
                i = bisect_left(view, nxt[:-1] + bytes((nxt[-1] + 1,)), i) if nxt[-1] < 255 else len(view)
            else:
                i += 1
        return out

    def _close_ok(self, cands: Candidates, q: bytes) -> bool:
        if q:
            return cands.ends_at_last_line(q)
        return cands.k > 0 and cands.count == 1

    def _decoded(self, st: State, data: bytes) -> State | None:
        """old_str's state after decoded bytes `data`."""
        _, q, cands, cursor, _ = st
        for b in data:
            r = self.old_line_step(cands, q, b)
            if r is None:
                return None
            if isinstance(r, Candidates):
                cands, q = r, b""
            else:
                q = r
        return ("s", q, cands, cursor, "")

    def _old_step(self, st: State, b: int) -> State | None:
        _, q, cands, cursor, esc = st
        if esc == "":
            if b == QUOTE:
                if not self._close_ok(cands, q):
                    return None
                after = self.index.n if q else self.after(cands, cursor)
                return ("o", None, None, after, 2)
            if b == BACKSLASH:
                return ("s", q, cands, cursor, "\\") if _at_char_boundary(q) and self._next_chars(cands, q) else None
            if b < 0x20 or b == 0xFF:
                return None
            return self._decoded(st, bytes((b,)))
        if esc == "\\":
            if b == 0x75:  # "u"
                return ("s", q, cands, cursor, "u") if any(c < 0x10000 for c in self._next_chars(cands, q)) else None
            c = _SIMPLE.get(b)
            return None if c is None else self._decoded(st, bytes((c,)))
        if b not in _HEX:  # "u" and up to three hex digits so far
            return None
        digits = esc[1:] + chr(b).lower()
        chars = [c for c in self._next_chars(cands, q) if c < 0x10000 and f"{c:04x}".startswith(digits)]
        if not chars:
            return None
        if len(digits) < 4:
            return ("s", q, cands, cursor, "u" + digits)
        return self._decoded(st, chr(int(digits, 16)).encode("utf-8"))

    def _old_next(self, st: State) -> set[int]:
        _, q, cands, cursor, esc = st
        if esc == "\\":
            chars = self._next_chars(cands, q)
            out = {k for k, c in _SIMPLE.items() if c in chars}
            if any(c < 0x10000 for c in chars):
                out.add(0x75)
            return out
        if esc:
            digits = esc[1:]
            out = set()
            for c in self._next_chars(cands, q):
                h = f"{c:04x}"
                if c < 0x10000 and h.startswith(digits):
                    out.update((ord(h[len(digits)]), ord(h[len(digits)].upper())))
            return out
        out = {b for b in cands.next_bytes(q) if 0x20 <= b < 0xFF and b not in (QUOTE, BACKSLASH)}
        if _at_char_boundary(q) and self._next_chars(cands, q):
            out.add(BACKSLASH)
        if self._close_ok(cands, q):
            out.add(QUOTE)
        return out

    def forced_next(self, st: State) -> int | None:
        """Where old_str's decoded text can go on one way only (one character, or the line's end),
        the next byte of its canonical JSON spelling (``json.dumps``'): every spelling is allowed,
        the canonical one is forced, as forced text takes the tokenizer's own tokenization."""
        if st[0] != "s":
            return None
        _, q, cands, _, esc = st
        if not _at_char_boundary(q):  # inside a raw UTF-8 character: its next byte
            nb = {b for b in cands.next_bytes(q) if b < 0xFF}
            return next(iter(nb)) if len(nb) == 1 and not cands.has_line(q) else None
        chars = self._next_chars(cands, q)
        close = esc == "" and self._close_ok(cands, q)
        if close:
            return QUOTE if not chars else None
        if len(chars) != 1:
            return None
        c = next(iter(chars))
        canonical = _CANONICAL.get(c) or (f"\\u{c:04x}".encode() if c < 0x20 else chr(c).encode("utf-8"))
        done = esc if esc in ("", "\\") else "\\" + esc  # the escape written so far
        spelled = done.encode()
        if not canonical.startswith(spelled) or len(canonical) == len(spelled):
            return None
        return canonical[len(spelled)]

    # -- the interface ------------------------------------------------------------------------------------
    def step(self, st: State, b: int) -> State | None:
        sec, q, cands, cursor, extra = st
        if sec == "s":
            return self._old_step(st, b)
        if sec == "o":
            if b == BRACE:  # a new call: its old_str needs a line at or after the cursor
                return ("o", None, None, cursor, 0) if cursor < self.index.n else None
            if b == QUOTE:
                n = extra + 1
                if n == 2:
                    return ("s", b"", self.index.first(cursor), cursor, "")
                return ("f", None, None, cursor, (n, "")) if n == 4 else ("k", None, None, cursor, n)
            return st
        if sec == "k":
            return ("o", None, None, cursor, extra) if b == QUOTE else st
        n, esc = extra  # "f": new_str's text, free but for its end and its escapes
        if esc == "":
            if b == QUOTE:
                return ("o", None, None, cursor, n)
            return ("f", None, None, cursor, (n, "\\")) if b == BACKSLASH else st
        if esc == "\\":
            if b == 0x75:
                return ("f", None, None, cursor, (n, "u"))
            return ("f", None, None, cursor, (n, "")) if b in _SIMPLE else None
        if b not in _HEX:
            return None
        esc += chr(b)
        return ("f", None, None, cursor, (n, "" if len(esc) == 5 else esc))

    def eos_ok(self, st: State) -> bool:
        return st[0] == "o"

    def stops(self, st: State):
        sec = st[0]
        if sec == "o":
            return b'"{', st
        if sec == "k":
            return b'"', st
        if sec == "f" and st[4][1] == "":
            return b'"\\', st
        return None

    def next_bytes(self, st: State) -> set[int] | None:
        return self._old_next(st) if st[0] == "s" else None
