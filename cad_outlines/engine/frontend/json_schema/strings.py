"""String constraints as automata over code points, and JSON's spelling of them as byte DFAs.

A JSON Schema string constraint (``minLength``/``maxLength``, ``pattern``, ``format``, ``enum``)
is a set of *decoded* strings. It becomes a lexer terminal through two steps:

1. a DFA over code points (:data:`~..automata.CodepointDFA`) of the decoded strings: built here
   (lengths, literal sets, the intersection of two) or by the regex compiler (``pattern``,
   ``format``; a ``pattern`` matches anywhere in the string, as ``re.search`` does, see
   :func:`search_regex`);
2. :func:`json_string_dfa`: each character written as JSON writes it, between quotes. A character
   is written raw, except ``"``, ``\\`` and the control characters U+0000-U+001F, which must be
   escaped (``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``, or ``\\u00XX`` for a control character);
   ``/`` may also be written ``\\/``. Other ``\\uXXXX`` escapes are not part of the language
   (llguidance's default too): each string has few spellings, and every spelling the model writes
   decodes to a string of the class.
"""

from __future__ import annotations

import functools
import re
import warnings

from ..automata import ByteDFA, CodepointDFA, UnsupportedRegex, codepoint_dfa_to_bytes, regex_to_codepoint_dfa

__all__ = ["ANY_CHAR", "any_string", "literals", "intersect", "search_regex", "pattern_dfa", "json_string_dfa",
           "is_empty"]

ANY_CHAR = ((0, 0xD800), (0xE000, 0x110000))  # every code point UTF-8 can encode
_NAMED = {0x22: "\"", 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_MUST_ESCAPE = ((0, 0x20), (0x22, 0x23), (0x5C, 0x5D))


def any_string(min_len: int = 0, max_len: int | None = None) -> CodepointDFA:
    """Strings of `min_len` to `max_len` (None: any number of) code points."""
    top = max_len if max_len is not None else min_len
    trans, accept = [], []
    for i in range(top + 1):
        nxt = i + 1 if i < top else (i if max_len is None else None)
        trans.append([] if nxt is None else [(lo, hi, nxt) for lo, hi in ANY_CHAR])
        accept.append(i >= min_len)
    return trans, accept


def literals(values) -> CodepointDFA:
    """The finite set `values` (strings) as a trie."""
    trans: list[list[tuple[int, int, int]]] = [[]]
    accept = [False]
    edges: list[dict[int, int]] = [{}]
    for v in values:
        s = 0
        for ch in v:
            c = ord(ch)
            if 0xD800 <= c < 0xE000:
                break  # a lone surrogate cannot be written in UTF-8: not in the language
            t = edges[s].get(c)
            if t is None:
                t = edges[s][c] = len(trans)
                trans.append([])
                accept.append(False)
                edges.append({})
            s = t
        else:
            accept[s] = True
    for s, e in enumerate(edges):
        trans[s] = [(c, c + 1, t) for c, t in sorted(e.items())]
    return trans, accept


def intersect(a: CodepointDFA, b: CodepointDFA) -> CodepointDFA:
    """The product DFA of two code-point DFAs (reachable pairs only)."""
    ta, aa = a
    tb, ab = b
    ids = {(0, 0): 0}
    todo = [(0, 0)]
    trans: list[list[tuple[int, int, int]]] = []
    accept: list[bool] = []
    while len(trans) < len(todo):
        x, y = todo[len(trans)]
        accept.append(aa[x] and ab[y])
        out = []
        ea, eb = ta[x], tb[y]
        i = j = 0
        while i < len(ea) and j < len(eb):
            lo, hi = max(ea[i][0], eb[j][0]), min(ea[i][1], eb[j][1])
            if lo < hi:
                key = (ea[i][2], eb[j][2])
                t = ids.get(key)
                if t is None:
                    t = ids[key] = len(todo)
                    todo.append(key)
                out.append((lo, hi, t))
            if ea[i][1] <= eb[j][1]:
                i += 1
            else:
                j += 1
        trans.append(out)
    return trans, accept


def is_empty(a: CodepointDFA) -> bool:
    """No string is accepted."""
    trans, accept = a
    seen, todo = {0}, [0]
    while todo:
        s = todo.pop()
        if accept[s]:
            return False
        for _, _, t in trans[s]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return True


def _split_top(p: str) -> list[str]:
    """`p` cut at its top-level ``|`` (outside groups and character classes)."""
    parts, start, depth, i, n = [], 0, 0, 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < n and p[i] == "^":
                i += 1
            if i < n and p[i] == "]":
                i += 1
            while i < n and p[i] != "]":
                i += 2 if p[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(p[start:i])
            start = i + 1
        i += 1
    parts.append(p[start:])
    return parts


def _ends_with_anchor(b: str) -> bool:
    if not b.endswith("$"):
        return False
    k = len(b) - 1
    slashes = 0
    while k > 0 and b[k - 1] == "\\":
        slashes += 1
        k -= 1
    return slashes % 2 == 0


def search_regex(pattern: str) -> str:
    """A regex whose full matches are the strings in which ``re.search(pattern, s)`` finds a
    match (what ``jsonschema`` checks for ``pattern``): each top-level alternative not anchored
    by ``^`` may start anywhere and one not anchored by ``$`` may end anywhere; ``$`` also
    matches before a final line break, as in Python. An anchor anywhere else is left in place,
    and the regex compiler refuses it."""
    flags = ""
    m = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    if m:  # global flags must stay at the very start
        flags, pattern = m.group(0), pattern[m.end():]
    out = []
    for b in _split_top(pattern):
        head = "" if b.startswith("^") else r"[\s\S]*"
        b = b[1:] if b.startswith("^") else b
        tail = r"\n?" if _ends_with_anchor(b) else r"[\s\S]*"
        b = b[:-1] if tail == r"\n?" else b
        out.append(f"{head}(?:{b}){tail}")
    return flags + "|".join(out)


@functools.lru_cache(maxsize=1024)
def pattern_dfa(pattern: str) -> CodepointDFA:
    """The strings ``re.search(pattern, s)`` accepts, as a code-point DFA. Raises ``re.error``
    for an invalid pattern and :class:`UnsupportedRegex` for one without an exact DFA."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # re's FutureWarnings about possible set syntax
        re.compile(pattern)  # the user's own pattern must be valid on its own
        return regex_to_codepoint_dfa(search_regex(pattern))


def _subtract(lo: int, hi: int, holes) -> list[tuple[int, int]]:
    out, cur = [], lo
    for a, b in holes:
        if b <= cur or a >= hi:
            continue
        if a > cur:
            out.append((cur, a))
        cur = max(cur, b)
    if cur < hi:
        out.append((cur, hi))
    return out


_HEX = "0123456789abcdef"


def _encode(dfa: CodepointDFA) -> CodepointDFA:
    """`dfa` over decoded characters -> a DFA over JSON's spelling of them, quotes included."""
    trans, accept = dfa
    n = len(trans)
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(n + 2)]
    acc = [False] * (n + 2)
    start, final = n, n + 1  # new states: before the opening quote, after the closing one
    acc[final] = True
    out[start] = [(0x22, 0x23, 0)]

    def new() -> int:
        out.append([])
        acc.append(False)
        return len(out) - 1

    for s in range(n):
        edges: list[tuple[int, int, int]] = []
        special: dict[int, int] = {}
        for lo, hi, t in trans[s]:
            edges.extend((a, b, t) for a, b in _subtract(lo, hi, _MUST_ESCAPE))
            for c in list(range(max(lo, 0), min(hi, 0x20))) + [x for x in (0x22, 0x2F, 0x5C) if lo <= x < hi]:
                special[c] = t
        if accept[s]:
            edges.append((0x22, 0x23, final))
        if special:
            esc = new()
            edges.append((0x5C, 0x5D, esc))
            e_out = [(ord(_NAMED[c]), ord(_NAMED[c]) + 1, t) for c, t in special.items() if c in _NAMED]
            controls = {c: t for c, t in special.items() if c < 0x20}
            if controls:
                u = new()
                e_out.append((ord("u"), ord("u") + 1, u))
                u0 = new()
                out[u] = [(0x30, 0x31, u0)]
                u00 = new()
                out[u0] = [(0x30, 0x31, u00)]
                hi_edges = []
                for high in (0, 1):
                    group = {c & 15: t for c, t in controls.items() if c >> 4 == high}
                    if not group:
                        continue
                    h = new()
                    hi_edges.append((0x30 + high, 0x31 + high, h))
                    low = []
                    for d, t in group.items():
                        low.append((ord(_HEX[d]), ord(_HEX[d]) + 1, t))
                        if d >= 10:
                            low.append((ord(_HEX[d].upper()), ord(_HEX[d].upper()) + 1, t))
                    out[h] = sorted(low)
                out[u00] = hi_edges
            out[esc] = sorted(e_out)
        out[s] = sorted(edges)
    # the start state must be state 0 for the byte expansion: swap 0 and `start`
    perm = list(range(len(out)))
    perm[0], perm[start] = start, 0
    inv = {old: new_ for new_, old in enumerate(perm)}
    trans2 = [[(lo, hi, inv[t]) for lo, hi, t in out[old]] for old in perm]
    return trans2, [acc[old] for old in perm]


def json_string_dfa(dfa: CodepointDFA) -> ByteDFA:
    """The JSON string literals (quotes included) whose decoded value `dfa` accepts."""
    return codepoint_dfa_to_bytes(_encode(dfa))


__all__ += ["UnsupportedRegex"]
