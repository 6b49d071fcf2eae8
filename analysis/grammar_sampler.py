"""Random Lark grammars, mutations of real ones, and texts sampled from a grammar: the fuzzer's inputs.

Nothing here asks the engine under test: grammars are text, sentences are drawn from lark's own compiled
rules (``lark.Lark(...).rules``, after EBNF expansion) and each terminal's text from its regex as Python's
``re`` parser reads it, checked with ``re.fullmatch``. Whether a text is a sentence is for lark to say
(:mod:`analysis.lark_oracle`), so a sample that lark rejects is as good a test as one it accepts.

- :func:`random_grammar`: the constructs lark's LALR takes: ``?``/``!``/``_`` rules, aliases, templates,
  rule and terminal priorities, ``%ignore``, ``%declare`` with the Python indenter, ``"..."i``, regex
  terminals with classes, quantifiers (greedy and lazy), alternation, groups and flags, empty
  alternatives, left and right recursion, EBNF (``?``, ``*``, ``+``, ``[...]``, ``~ n``), ``%import common``.
- :func:`mutate_grammar`: one text-level change to a real grammar (an alternative dropped or repeated, an
  item made optional or repeated, symbols swapped, a priority added, an ``%ignore`` added or removed).
- :class:`SentenceSampler`: random derivations of a grammar lark built, with the text of each terminal,
  ignored text between lexemes, and indentation for the indenter's ``_NEWLINE``/``_INDENT``/``_DEDENT``.
- :func:`edits`: single-character insertions, deletions and replacements of a text.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from cad_outlines.engine.frontend._sre_compat import K, parse as sre_parse

__all__ = ["random_grammar", "syntax_grammar", "mutate_grammar", "SentenceSampler", "RegexSampler", "edits"]

# characters single-character classes and edits draw from: ASCII first, a few others after
ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-+*/=<>!?.,:;()[]{}\"'#\\\t\n"
            "\u00e9\u00df\u4e2d\u0394")
WORDS = ["a", "b", "x", "y", "if", "def", "end", "do", "or", "and", "in", "is", "ab", "ba", "xy", "let"]
PUNCT = ["(", ")", "[", "]", "{", "}", ",", ";", ":", "+", "-", "*", "/", "=", "==", "<", "<=", "<<", "->", ".",
         "..", "!", "?", "@", "#", "'", "\\\"", "\\\\"]
COMMON = ["NUMBER", "INT", "SIGNED_NUMBER", "DECIMAL", "WORD", "CNAME", "ESCAPED_STRING", "LETTER", "DIGIT",
          "HEXDIGIT", "WS_INLINE", "SH_COMMENT", "CPP_COMMENT", "C_COMMENT", "NEWLINE"]
POOL = ALPHABET + "".join(chr(c) for c in range(0x20, 0x2FF, 7)) + "\u2028\u3000\U0001F600"
CLASSES = ["[a-z]", "[A-Z]", "[0-9]", "[a-z0-9_]", "[^\\s\"]", "[^\\n]", "\\d", "\\w", "[xyz]", "[+\\-]", "[ \\t]",
           "[^a-c]", "[\\u00e0-\\u00ff]", "."]


# ------------------------------------------------------------------------------------------ regexes
def _regex(rng: random.Random, depth: int = 0) -> str:
    """A random regex body (no delimiters): classes, literals, groups, alternation, quantifiers."""
    parts = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.35:
            atom = rng.choice(CLASSES)
        elif r < 0.6:
            atom = re.escape(rng.choice(WORDS + ["(", ".", "-", "\"", "'", "#"]))
        elif r < 0.8 and depth < 2:
            alts = [_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))]
            atom = ("(?:" if rng.random() < 0.5 else "(") + "|".join(alts) + ")"
        elif depth < 2:
            atom = "(" + _regex(rng, depth + 1) + ")"
        else:
            atom = rng.choice(CLASSES)
        q = rng.random()
        if q < 0.25:
            atom += rng.choice(["*", "+", "?", "{1,3}", "{2}", "*?", "+?", "??", "{0,2}"])
        parts.append(atom)
    return "".join(parts)


def _regex_terminal(rng: random.Random) -> str:
    body = _regex(rng)
    if rng.random() < 0.15:
        body = "(?i:" + body + ")"
    flags = "".join(f for f in "ims" if rng.random() < 0.15)
    return "/" + body.replace("/", "\\/") + "/" + flags


def _string_terminal(rng: random.Random) -> str:
    s = rng.choice(WORDS + PUNCT) if rng.random() < 0.8 else "".join(rng.choice(WORDS) for _ in range(2))
    return f'"{s}"' + ("i" if rng.random() < 0.15 and s.isalpha() else "")


# ------------------------------------------------------------------------------------------ grammars
@dataclass
class _Names:
    rules: list[str]
    terminals: list[str]
    inline: bool  # whether anonymous "..." items may appear


def _item(rng: random.Random, names: _Names, me: int, depth: int) -> str:
    r = rng.random()
    later = names.rules[me + 1:]
    if r < 0.35 and names.terminals:
        base = rng.choice(names.terminals)
    elif r < 0.5 and names.inline:
        base = _string_terminal(rng)
    elif r < 0.6 and names.inline and rng.random() < 0.3:
        base = _regex_terminal(rng)
    elif r < 0.85 and later:
        base = rng.choice(later)
    elif r < 0.93:  # recursion, or a rule defined earlier
        base = rng.choice(names.rules[: me + 1])
    elif depth < 2:
        base = "(" + _alternatives(rng, names, me, depth + 1, 2) + ")"
    else:
        base = rng.choice(names.terminals) if names.terminals else _string_terminal(rng)
    q = rng.random()
    if q < 0.12:
        return base + "?"
    if q < 0.22:
        return base + "*"
    if q < 0.32:
        return base + "+"
    if q < 0.38:
        return "[" + base + "]"
    if q < 0.41:
        return base + f" ~ {rng.randint(1, 3)}" if not base.startswith("(") else base
    if q < 0.43:
        return base + f" ~ {rng.randint(0, 1)}..{rng.randint(2, 3)}" if not base.startswith("(") else base
    return base


def _alternatives(rng: random.Random, names: _Names, me: int, depth: int, most: int = 3) -> str:
    alts = []
    for _ in range(rng.randint(1, most)):
        n = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]) if depth == 0 else rng.randint(1, 2)
        alt = " ".join(_item(rng, names, me, depth) for _ in range(n))
        if depth == 0 and alt and rng.random() < 0.08:
            alt += f" -> al{rng.randint(0, 3)}"
        alts.append(alt)
    return " | ".join(alts)


def random_grammar(rng: random.Random) -> str:
    """One random grammar's text (lark may refuse it: conflicts are common): mostly built for lark's LALR,
    some for lark's grammar syntax (:func:`syntax_grammar`), some Python-like blocks for the indenter."""
    r = rng.random()
    if r < 0.12:
        return _indenter_grammar(rng)
    if r < 0.3:
        return syntax_grammar(rng)
    n_rules = rng.randint(1, 6)
    rules = ["start"] + [f"r{i}" for i in range(1, n_rules)]
    n_terms = rng.randint(0, 4)
    terminals = [f"T{i}" for i in range(n_terms)]
    imports = rng.sample(COMMON, k=rng.choice([0, 0, 0, 1, 2]))
    lines = []
    names = _Names(rules, terminals + imports, inline=rng.random() < 0.8 or not n_terms)
    template = rng.random() < 0.15
    if template:
        lines.append("_sep{x, s}: x (s x)*")
    for i, name in enumerate(rules):
        prefix = "" if i == 0 else rng.choice(["", "", "", "?", "!", "_"])
        prio = f".{rng.randint(1, 3)}" if rng.random() < 0.12 else ""
        body = _alternatives(rng, names, i, 0)
        if template and rng.random() < 0.3:
            body += " | _sep{" + rng.choice(rules[i:] + terminals + ['"a"']) + ', ","}'
        lines.append(f"{prefix}{name}{prio}: {body}")
    for t in terminals:
        prio = f".{rng.randint(-1, 3)}" if rng.random() < 0.15 else ""
        lines.append(f"{t}{prio}: " + (_string_terminal(rng) if rng.random() < 0.4 else _regex_terminal(rng)))
    for imp in imports:
        lines.append(f"%import common.{imp}")
    r = rng.random()
    if r < 0.35:
        lines.append(rng.choice(['%ignore " "', '%ignore /[ \\t]+/', "%ignore /\\s+/"]))
    elif r < 0.45:
        lines.append("%import common.WS\n%ignore WS")
    if rng.random() < 0.1:
        lines.append("%ignore /#[^\\n]*/")
    return "\n".join(lines) + "\n"


def _indenter_grammar(rng: random.Random) -> str:
    """A Python-like block grammar for lark's PythonIndenter (``%declare _INDENT _DEDENT``)."""
    stmt = rng.choice(['NAME "=" expr', '"pass"', 'NAME "(" [expr ("," expr)*] ")"', '"return" expr?'])
    compound = rng.choice(['"if" expr ":" suite', '"while" expr ":" suite ["else" ":" suite]',
                           '"def" NAME "(" ")" ":" suite'])
    expr = rng.choice(['NAME | NUMBER | "(" expr ")" | expr "+" NAME',
                       'atom ("+" atom)*\n?atom: NAME | NUMBER | "[" [expr ("," expr)*] "]"'])
    nl = rng.choice(["( /\\r?\\n[\\t ]*/ | /#[^\\n]*/ )+", "/(\\r?\\n[\\t ]*)+/"])
    return (f"start: (_NEWLINE | stmt)*\n?stmt: simple _NEWLINE | compound\nsimple: {stmt}\ncompound: {compound}\n"
            f"suite: simple _NEWLINE | _NEWLINE _INDENT stmt+ _DEDENT\n?expr: {expr}\n"
            f"NAME: /[a-z_]+/\nNUMBER: /[0-9]+/\n_NEWLINE: {nl}\n%ignore /[\\t ]+/\n%declare _INDENT _DEDENT\n")


# grammars for lark's grammar syntax (moved from tests/engine/frontend/test_lark_rules.py)
_LITERALS = ['"a"', '"b"', '"ab"', '"("', '")"', '","', '"if"', '"x"i', '"\\\\"', '"\\""', "\"'\""]
_REGEXPS = ["/[a-c]+/", "/x/i", "/[0-9]+(\\.[0-9]+)?/", "/\\w+/", "/a|b/"]


def _expr(rng: random.Random, names: list[str], depth: int, templates: list[str]) -> str:
    """One item of a rule body. Repeats (~) go on plain atoms only, and groups nest two
    deep, so that no grammar blows up (lark multiplies out nested alternatives)."""
    r = rng.random()
    group = depth > 0 and r >= 0.45
    if not group:
        k = rng.random()
        if k < 0.45:
            atom = rng.choice(names)
        elif k < 0.7:
            atom = rng.choice(_LITERALS)
        elif k < 0.8:
            atom = rng.choice(_REGEXPS)
        elif k < 0.9:
            atom = '"a".."f"'
        elif templates:
            atom = "%s{%s}" % (rng.choice(templates), rng.choice(names + _LITERALS[:3]))
        else:
            atom = rng.choice(names)
    elif r < 0.75:
        atom = "(" + _alts(rng, names, depth - 1, templates) + ")"
    elif r < 0.85:
        atom = "[" + _alts(rng, names, depth - 1, templates) + "]"
    else:
        atom = "(" + " ".join(_expr(rng, names, depth - 1, templates) for _ in range(rng.randint(1, 2))) + ")"
    op = rng.random()
    if group:  # optional groups inside optional groups make lark's "Rules defined twice"
        return atom + ("+" if op < 0.1 else "")
    if op < 0.08:
        return atom + "?"
    if op < 0.2:
        return atom + "*"
    if op < 0.34:
        return atom + "+"
    if op < 0.4:
        return atom + " ~ %d" % rng.randint(1, 3)
    if op < 0.46:  # 0..61 exercises lark's split of long repeats into helper rules
        lo = rng.randint(0, 2)
        return atom + " ~ %d..%d" % (lo, lo + rng.choice([0, 1, 2, 59]))
    return atom


def _alts(rng: random.Random, names: list[str], depth: int, templates: list[str]) -> str:
    return " | ".join(" ".join(_expr(rng, names, depth, templates)
                               for _ in range(rng.randint(int(rng.random() >= 0.1), 2)))
                      for _ in range(rng.randint(1, 3)))


def syntax_grammar(rng: random.Random) -> str:
    """A random grammar that exercises lark's grammar syntax (templates, ranges, terminals built from
    terminals, `~` repeats, `%import common (A, B)`, `%declare`, lines in any order; now and then a mistake
    lark refuses): what tests/engine/frontend/test_lark_rules.py compares our reader with lark's on, and a
    share of the fuzzer's grammars."""
    rules = ["start"] + [rng.choice(["", "_", "", ""]) + "r%d" % i for i in range(rng.randint(1, 5))]
    terms = [rng.choice(["", "_"]) + "T%d" % i for i in range(rng.randint(0, 3))]
    imported = rng.sample(["NUMBER", "WORD", "INT", "ESCAPED_STRING", "WS", "CNAME"], rng.randint(0, 2))
    names = rules + terms + imported + (["UNDEFINED"] if rng.random() < 0.05 else [])
    templates = [rng.choice(["tpl", "_tpl"])] if rng.random() < 0.3 else []
    lines = []
    if templates:
        lines.append(templates[0] + rng.choice(['{x}: x ("," x)*', '{x}: "[" x "]" | x']))
    for name in rules:
        mod = rng.choice(["", "", "?", "!", "!?"]) if not name.startswith("_") or rng.random() < 0.02 else ""
        prio = ".%d" % rng.randint(-1, 3) if rng.random() < 0.1 else ""
        alts = []
        for _ in range(rng.randint(1, 3)):
            body = " ".join(_expr(rng, names, 2, templates) for _ in range(rng.randint(int(rng.random() >= 0.1), 3)))
            if rng.random() < (0.2 if not name.startswith("_") else 0.02):
                body += " -> al%d" % rng.randint(0, 3)
            alts.append(body)
        sep = rng.choice([" | ", "\n    | "])
        lines.append(f"{mod}{name}{prio}: " + sep.join(alts))
    for name in terms:
        prio = ".%d" % rng.randint(0, 3) if rng.random() < 0.2 else ""
        earlier = terms[:terms.index(name)] + (terms[-1:] if rng.random() < 0.03 else [])  # rarely recursive
        tnames = earlier + imported
        body = " | ".join(" ".join(_term_atom(rng, tnames) for _ in range(rng.randint(1, 3)))
                          for _ in range(rng.randint(1, 2)))
        lines.append(f"{name}{prio}: {body}")
    if len(imported) == 1 or (imported and rng.random() < 0.5):
        lines += ["%%import common.%s" % n for n in imported]
    elif imported:
        lines.append("%%import common (%s)" % ", ".join(imported))
    if rng.random() < 0.5:
        lines.append(rng.choice(['%ignore " "', "%ignore WS\n%import common.WS", "%ignore /[ \\t]+/"]))
    if rng.random() < 0.1:
        lines.append("%declare DECL")
    if rng.random() < 0.05:
        lines.append(rng.choice(["r0: r0", "start: start", "a::", "%import common", '"x"']))  # errors
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def _term_atom(rng: random.Random, tnames: list[str]) -> str:
    k = rng.random()
    if k < 0.3 and tnames:
        atom = rng.choice(tnames)
    elif k < 0.6:
        atom = rng.choice(_LITERALS)
    elif k < 0.8:
        atom = rng.choice(_REGEXPS)
    else:
        atom = '"0".."9"'
    return atom + rng.choice(["", "", "?", "*", "+", " ~ 2", " ~ 1..3"])



_RULE_LINE = re.compile(r"^([?!]?_?[a-z][a-z0-9_]*(?:\.-?\d+)?)\s*:(.*)$")


def _split_top(body: str, sep: str) -> list[str]:
    """`body` split at `sep` outside quotes, regexes and brackets."""
    out, depth, cur, i, quote = [], 0, "", 0, None
    while i < len(body):
        c = body[i]
        if quote:
            cur += c
            if c == "\\" and i + 1 < len(body):
                cur += body[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"/":
            quote = c
            cur += c
        elif c in "([{":
            depth += 1
            cur += c
        elif c in ")]}":
            depth -= 1
            cur += c
        elif depth == 0 and body.startswith(sep, i):
            out.append(cur)
            cur = ""
            i += len(sep) - 1
        else:
            cur += c
        i += 1
    out.append(cur)
    return out


def mutate_grammar(rng: random.Random, text: str) -> str:
    """`text` with one random change to one rule definition (or an %ignore added or removed)."""
    lines = text.split("\n")
    rule_at = [i for i, line in enumerate(lines) if _RULE_LINE.match(line) and "|" not in line[-1:]]
    op = rng.random()
    if op < 0.08 or not rule_at:
        ignores = [i for i, line in enumerate(lines) if line.startswith("%ignore")]
        if ignores and rng.random() < 0.5:
            del lines[rng.choice(ignores)]
        else:
            lines.append(rng.choice(['%ignore " "', "%ignore /[ \\t\\n]+/", '%ignore "#"']))
        return "\n".join(lines)
    i = rng.choice(rule_at)
    head, body = _RULE_LINE.match(lines[i]).groups()
    alts = _split_top(body, "|")
    k = rng.randrange(len(alts))
    items = [x for x in _split_top(alts[k].strip(), " ") if x]
    if op < 0.25 and len(alts) > 1:
        del alts[k]
    elif op < 0.35:
        alts.append(alts[k] + " " + (items[0] if items else '"z"'))
    elif op < 0.5 and items:
        j = rng.randrange(len(items))
        items[j] = (f"[{items[j]}]" if rng.random() < 0.5 else items[j] + rng.choice(["*", "+", "?"]))
        alts[k] = " " + " ".join(items)
    elif op < 0.6 and len(items) > 1:
        j = rng.randrange(len(items) - 1)
        items[j], items[j + 1] = items[j + 1], items[j]
        alts[k] = " " + " ".join(items)
    elif op < 0.7 and items:
        del items[rng.randrange(len(items))]
        alts[k] = " " + " ".join(items)
    elif op < 0.8:
        alts.append(" ")  # an empty alternative
    elif op < 0.9:
        name = head.split(".")[0]
        head = f"{name}.{rng.randint(1, 3)}"
    else:
        alts[k] = alts[k] + " " + rng.choice(PUNCT[:12]).join('""')
    lines[i] = f"{head}:{'|'.join(alts)}"
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ texts
class RegexSampler:
    """Random strings of a regex, from Python's own parse of it; :meth:`sample` checks each candidate
    with ``re.fullmatch`` and returns None when a few tries found none (lookarounds, anchors)."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags = pattern, flags
        self.regex = re.compile(pattern, flags)
        self.tree = sre_parse(pattern, flags)
        self._chars: dict[tuple, list[str]] = {}  # (node, case-insensitive) -> the pool's characters in it

    def sample(self, rng: random.Random, tries: int = 8) -> str | None:
        for _ in range(tries):
            out: list[str] = []
            try:
                self._seq(self.tree, rng, out, bool(self.flags & re.I))
            except _NoSample:
                continue
            s = "".join(out)
            if s and self.regex.fullmatch(s):
                return s
        return None

    def _seq(self, seq, rng, out, icase) -> None:
        for op, av in seq:
            self._op(op, av, rng, out, icase)

    def _op(self, op, av, rng, out, icase) -> None:
        if op is K.LITERAL:
            c = chr(av)
            out.append(c.swapcase() if icase and rng.random() < 0.3 else c)
        elif op in (K.NOT_LITERAL, K.ANY, K.IN):
            key = (op, id(av), icase)
            chars = self._chars.get(key)
            if chars is None:
                ok = {K.NOT_LITERAL: lambda c: ord(c) != av, K.ANY: lambda c: True,
                      K.IN: lambda c: _in_class(av, c, icase)}[op]
                chars = self._chars[key] = [c for c in POOL if ok(c)]
            if not chars:
                raise _NoSample
            ascii_chars = [c for c in chars if c < "\x80"] if rng.random() < 0.9 else chars
            out.append(rng.choice(ascii_chars or chars))
        elif op is K.BRANCH:
            self._seq(rng.choice(av[1]), rng, out, icase)
        elif op is K.SUBPATTERN:
            add = av[1] if len(av) > 1 else 0
            self._seq(av[-1], rng, out, icase or bool(add & re.I))
        elif op in (K.MAX_REPEAT, K.MIN_REPEAT, K.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            hi = min(hi, lo + 3) if hi != K.MAXREPEAT else lo + 3
            for _ in range(rng.randint(lo, hi)):
                self._seq(sub, rng, out, icase)
        elif op is K.ATOMIC_GROUP:
            self._seq(av, rng, out, icase)
        elif op in (K.AT, K.ASSERT, K.ASSERT_NOT):
            pass  # zero-width: the fullmatch check says whether the sample holds
        else:
            raise _NoSample


class _NoSample(Exception):
    pass


def _in_class(items, c: str, icase: bool) -> bool:
    """Whether character `c` is in an IN class of Python's regex parse tree."""
    cands = {x for x in (c, c.lower(), c.upper()) if len(x) == 1} if icase else {c}
    negate = any(op is K.NEGATE for op, _ in items)
    hit = False
    for op, av in items:
        if op is K.LITERAL:
            hit = hit or any(ord(x) == av for x in cands)
        elif op is K.RANGE:
            hit = hit or any(av[0] <= ord(x) <= av[1] for x in cands)
        elif op is K.CATEGORY:
            hit = hit or _category(av, c)
    return hit != negate


def _category(cat, c: str) -> bool:
    name = str(cat).upper()
    if "DIGIT" in name:
        v = c.isdecimal()
    elif "SPACE" in name:
        v = c.isspace()
    elif "WORD" in name:
        v = c.isalnum() or c == "_"
    elif "LINEBREAK" in name:
        v = c == "\n"
    else:
        return False
    return not v if "NOT" in name else v


class SentenceSampler:
    """Random derivations of a grammar lark built (``lk``: a ``lark.Lark``): terminal sequences from the
    start rule, each terminal's text from its regex, ignored text between lexemes where the grammar has
    ``%ignore``, and lark's Indenter terminals rendered as line breaks and indentation."""

    def __init__(self, lk, max_depth: int = 12, max_terminals: int = 60):
        self.lk, self.max_depth, self.max_terminals = lk, max_depth, max_terminals
        self.by_origin: dict[str, list] = {}
        for r in lk.rules:
            self.by_origin.setdefault(r.origin.name, []).append(r)
        self.height = self._heights()
        self.patterns = {t.name: t.pattern for t in lk.terminals}
        self.samplers: dict[str, RegexSampler | None] = {}
        self.ignored = [t for t in lk.ignore_tokens if t in self.patterns]
        pl = lk.options.postlex
        self.indenter = pl if getattr(pl, "NL_type", None) else None

    def _heights(self) -> dict[str, int]:
        """Each rule's smallest derivation height (a fixpoint; unproductive rules are left out)."""
        h: dict[str, int] = {}
        changed = True
        while changed:
            changed = False
            for name, rules in self.by_origin.items():
                for r in rules:
                    kids = [h.get(s.name) for s in r.expansion if not s.is_term]
                    if all(k is not None for k in kids):
                        v = 1 + max(kids, default=0)
                        if v < h.get(name, 1 << 30):
                            h[name] = v
                            changed = True
        return h

    def terminals(self, rng: random.Random) -> list[str] | None:
        """A random terminal sequence of a sentence (None: the start rule derives nothing)."""
        start = self.lk.options.start[0]
        if start not in self.height:
            return None
        out: list[str] = []
        self._expand(start, rng, 0, out)
        return out

    def _expand(self, name: str, rng: random.Random, depth: int, out: list[str]) -> None:
        rules = [r for r in self.by_origin[name]
                 if all(s.is_term or s.name in self.height for s in r.expansion)]
        if depth >= self.max_depth or len(out) >= self.max_terminals:
            best = min(max((self.height[s.name] for s in r.expansion if not s.is_term), default=0) for r in rules)
            rules = [r for r in rules
                     if max((self.height[s.name] for s in r.expansion if not s.is_term), default=0) == best]
        rule = rng.choice(rules)
        for s in rule.expansion:
            if s.is_term:
                out.append(s.name)
            else:
                self._expand(s.name, rng, depth + 1, out)

    def terminal_text(self, name: str, rng: random.Random) -> str | None:
        if name not in self.samplers:
            pat = self.patterns.get(name)
            try:
                self.samplers[name] = (RegexSampler(pat.to_regexp(), _flags(self.lk)) if pat is not None else None)
            except (re.error, _NoSample, OverflowError, RecursionError):
                self.samplers[name] = None
        sampler = self.samplers[name]
        return sampler.sample(rng) if sampler is not None else None

    def sentence(self, rng: random.Random) -> str | None:
        """A random text built from a derivation (lark decides whether it is a sentence)."""
        terms = self.terminals(rng)
        if terms is None:
            return None
        if self.indenter is not None:
            return self._indented(terms, rng)
        parts = []
        for t in terms:
            text = self.terminal_text(t, rng)
            if text is None:
                return None
            parts.append(text)
            if self.ignored and rng.random() < 0.5:
                gap = self.terminal_text(rng.choice(self.ignored), rng)
                parts.append(gap or "")
        return "".join(parts)

    def _indented(self, terms: list[str], rng: random.Random) -> str | None:
        ind = self.indenter
        parts, level = [], 0
        for i, t in enumerate(terms):
            if t in (ind.INDENT_type, ind.DEDENT_type):
                continue
            if t == ind.NL_type:
                after = level
                for u in terms[i + 1:]:
                    if u == ind.INDENT_type:
                        after += 1
                    elif u == ind.DEDENT_type:
                        after -= 1
                    else:
                        break
                level = max(after, 0)
                parts.append("\n" + " " * (4 * level))
                continue
            text = self.terminal_text(t, rng)
            if text is None:
                return None
            parts.append(text + (" " if rng.random() < 0.7 else ""))
        return "".join(parts)


def _flags(lk) -> int:
    return int(getattr(lk.lexer_conf, "g_regex_flags", 0) or 0)


def edits(text: str, rng: random.Random, n: int, alphabet: str = ALPHABET) -> list[str]:
    """`n` single-character edits of `text` (an insertion, a deletion or a replacement each)."""
    out = []
    for _ in range(n):
        chars = list(text)
        pos = rng.randrange(len(chars) + 1)
        op = rng.random()
        c = rng.choice(alphabet)
        if op < 0.4 and pos < len(chars):
            chars[pos] = c
        elif op < 0.7 or not chars:
            chars.insert(pos, c)
        else:
            del chars[min(pos, len(chars) - 1)]
        out.append("".join(chars))
    return out
