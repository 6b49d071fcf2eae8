"""Lark's grammar language read by hand: grammar text -> the parse tree lark's own reader
(``lark.load_grammar._parse_grammar``) gives, ~10x faster.

Lark reads a ``.lark`` file with a general LALR parser written in Python and then a
transformer pass (34 ms of python.lark's 190 ms time to first mask). This module cuts the
same text into the same tokens (lark's grammar terminals, in the order lark's lexer tries
them) and parses them by recursive descent into equal trees: ``SlottedTree`` nodes with
the same labels, ``Token`` leaves of the same types and ``Terminal``/``NonTerminal``
symbols where lark's ``PrepareGrammar`` puts them.

It accepts exactly the language of lark's grammar rules (``lark.load_grammar.RULES``); on
any text it cannot read it returns None, and the caller lets lark read the text, so a
malformed grammar gets lark's own error message.
"""

from __future__ import annotations

import re

from lark.grammar import NonTerminal, Terminal
from lark.lexer import Token
from lark.tree import SlottedTree as ST

__all__ = ["parse_grammar_text"]

# lark.load_grammar.TERMINALS in the order lark's basic lexer tries them (priority, then
# widest pattern, then longest pattern text, then name); the first that matches wins.
_ORDER = (
    ("REGEXP", r"/(?!/)(\\/|\\\\|[^/])*?/[imslux]*"),
    ("STRING", r'"(\\"|\\\\|[^"\n])*?"i?'),
    ("COMMENT", r"\s*//[^\n]*|\s*#[^\n]*"),
    ("RULE", r"_?[a-z][_a-z0-9]*"),
    ("TERMINAL", r"_?[A-Z][_A-Z0-9]*"),
    ("_NL_OR", r"(\r?\n)+\s*\|"),
    ("_NL", r"(\r?\n)+\s*"),
    ("BACKSLASH", r"\\[ ]*\n"),
    ("NUMBER", r"[+-]?\d+"),
    ("WS", r"[ \t]+"),
    ("_OVERRIDE", r"%override"),
    ("_DECLARE", r"%declare"),
    ("_EXTEND", r"%extend"),
    ("_IGNORE", r"%ignore"),
    ("_IMPORT", r"%import"),
    ("RULE_MODIFIERS", r"(!|![?]?|[?]!?)(?=[_a-z])"),
    ("_DOTDOT", r"\.\."),
    ("_TO", r"->"),
    ("OP", r"[+*]|[?](?![a-z_])"),
    ("_DOT", r"\.(?!\.)"),
    ("_LBRA", r"\["),
    ("_LBRACE", r"\{"),
    ("_LPAR", r"\("),
    ("_OR", r"\|"),
    ("_RBRA", r"\]"),
    ("_RBRACE", r"\}"),
    ("_RPAR", r"\)"),
    ("TILDE", r"~"),
    ("_COLON", r":"),
    ("_COMMA", r","),
)
_MASTER = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _ORDER))
_SKIP = frozenset({"WS", "COMMENT", "BACKSLASH"})
_ATOM_START = frozenset({"_LPAR", "_LBRA", "TERMINAL", "RULE", "STRING", "REGEXP"})


class _Reject(Exception):
    """The text is not in lark's grammar language (lark will say why)."""


def _tokens(text: str) -> tuple[list[str], list[str]] | None:
    """(types, values) of the text's tokens, ignored ones dropped; None where no grammar
    terminal matches."""
    types: list[str] = []
    values: list[str] = []
    match, pos, end = _MASTER.match, 0, len(text)
    while pos < end:
        m = match(text, pos)
        if m is None:
            return None
        kind = m.lastgroup
        value = m.group()
        if not value:  # cannot happen with these patterns; guards an endless loop
            return None
        pos += len(value)
        if kind not in _SKIP:
            types.append(kind)
            values.append(value)
    return types, values


class _Parser:
    """Recursive descent over lark's grammar rules; builds lark's parse tree."""

    def __init__(self, types: list[str], values: list[str]):
        self.types = types + ["$END"]
        self.values = values + [""]
        self.i = 0

    def peek(self) -> str:
        return self.types[self.i]

    def take(self, kind: str) -> Token:
        if self.types[self.i] != kind:
            raise _Reject
        tok = Token(kind, self.values[self.i])
        self.i += 1
        return tok

    def skip(self, kind: str) -> None:
        if self.types[self.i] != kind:
            raise _Reject
        self.i += 1

    # -- statements -------------------------------------------------------------------

    def start(self) -> ST:
        items: list = []
        seen = False
        while self.peek() != "$END":
            seen = True
            kind = self.peek()
            if kind == "_NL":
                self.i += 1
            elif kind in ("RULE_MODIFIERS", "RULE"):
                items.append(self.rule())
            elif kind == "TERMINAL":
                items.append(self.term())
            elif kind in ("_OVERRIDE", "_EXTEND"):
                self.i += 1
                inner = self.term() if self.peek() == "TERMINAL" else self.rule()
                items.append(ST("override" if kind == "_OVERRIDE" else "extend", [inner]))
            elif kind == "_IGNORE":
                self.i += 1
                exp = self.expansions()
                self.skip("_NL")
                items.append(ST("ignore", [exp]))
            elif kind == "_DECLARE":
                self.i += 1
                items.append(self.declare())
            elif kind == "_IMPORT":
                self.i += 1
                items.append(self.import_())
            else:
                raise _Reject
        if not seen:
            raise _Reject
        return ST("start", items)

    def rule(self) -> ST:
        mods = [self.take("RULE_MODIFIERS")] if self.peek() == "RULE_MODIFIERS" else []
        name = self.take("RULE")
        params: list = []
        if self.peek() == "_LBRACE":
            self.i += 1
            params.append(self.take("RULE"))
            while self.peek() == "_COMMA":
                self.i += 1
                params.append(self.take("RULE"))
            self.skip("_RBRACE")
        prio: list = []
        if self.peek() == "_DOT":
            self.i += 1
            prio.append(self.take("NUMBER"))
        self.skip("_COLON")
        exp = self.expansions()
        self.skip("_NL")
        return ST("rule", [ST("rule_modifiers", mods), name, ST("template_params", params),
                           ST("priority", prio), exp])

    def term(self) -> ST:
        kids: list = [self.take("TERMINAL")]
        if self.peek() == "_DOT":
            self.i += 1
            kids.append(self.take("NUMBER"))
        self.skip("_COLON")
        kids.append(self.expansions())
        self.skip("_NL")
        return ST("term", kids)

    def declare(self) -> ST:
        syms: list = []
        while True:
            kind = self.peek()
            if kind == "TERMINAL":
                name = self.values[self.i]
                syms.append(Terminal(name, filter_out=name.startswith("_")))
            elif kind == "RULE":
                syms.append(NonTerminal(self.values[self.i]))
            else:
                break
            self.i += 1
        if not syms:
            raise _Reject
        self.skip("_NL")
        return ST("declare", syms)

    def name(self) -> Token:
        kind = self.peek()
        if kind not in ("RULE", "TERMINAL"):
            raise _Reject
        return self.take(kind)

    def import_(self) -> ST:
        relative = self.peek() == "_DOT"
        if relative:
            self.i += 1
        path = [self.name()]
        while self.peek() == "_DOT":
            self.i += 1
            path.append(self.name())
        kids: list = [ST("import_rel" if relative else "import_lib", path)]
        kind = self.peek()
        if kind == "_LPAR":
            self.i += 1
            names = [self.name()]
            while self.peek() == "_COMMA":
                self.i += 1
                names.append(self.name())
            self.skip("_RPAR")
            kids.append(ST("name_list", names))
        elif kind == "_TO":
            self.i += 1
            kids.append(self.name())
        self.skip("_NL")
        return ST("import", kids)

    # -- expressions ------------------------------------------------------------------

    def expansions(self) -> ST:
        alts = [self.alias()]
        while self.peek() in ("_OR", "_NL_OR"):
            self.i += 1
            alts.append(self.alias())
        return ST("expansions", alts)

    def alias(self):
        items: list = []
        types = self.types
        while types[self.i] in _ATOM_START:
            items.append(self.expr())
        exp = ST("expansion", items)
        if types[self.i] == "_TO":
            self.i += 1
            return ST("alias", [exp, NonTerminal(self.take("RULE").value)])
        return exp

    def expr(self):
        atom = self.atom()
        kind = self.types[self.i]
        if kind == "OP":
            return ST("expr", [atom, self.take("OP")])
        if kind == "TILDE":
            kids = [atom, self.take("TILDE"), self.take("NUMBER")]
            if self.peek() == "_DOTDOT":
                self.i += 1
                kids.append(self.take("NUMBER"))
            return ST("expr", kids)
        return atom

    def atom(self):
        kind = self.types[self.i]
        if kind == "_LPAR":
            self.i += 1
            exp = self.expansions()
            self.skip("_RPAR")
            return exp
        if kind == "_LBRA":
            self.i += 1
            exp = self.expansions()
            self.skip("_RBRA")
            return ST("maybe", [exp])
        return ST("value", [self.value()])

    def value(self):
        kind, text = self.types[self.i], self.values[self.i]
        self.i += 1
        if kind == "TERMINAL":
            return Terminal(text, filter_out=text.startswith("_"))
        if kind == "RULE":
            if self.types[self.i] != "_LBRACE":
                return NonTerminal(text)
            self.i += 1
            args = [ST("value", [self.value()])]
            while self.peek() == "_COMMA":
                self.i += 1
                args.append(ST("value", [self.value()]))
            self.skip("_RBRACE")
            return ST("template_usage", [NonTerminal(text), *args])
        if kind == "STRING":
            if self.types[self.i] == "_DOTDOT":
                self.i += 1
                return ST("range", [Token(kind, text), self.take("STRING")])
            return ST("literal", [Token(kind, text)])
        if kind == "REGEXP":
            return ST("literal", [Token(kind, text)])
        raise _Reject


def parse_grammar_text(text: str) -> ST | None:
    """Lark's parse tree of a grammar text (as ``_parse_grammar(text, name)`` returns it),
    or None where the text is not in lark's grammar language."""
    toks = _tokens(text + "\n")
    if toks is None:
        return None
    try:
        return _Parser(*toks).start()
    except _Reject:
        return None
