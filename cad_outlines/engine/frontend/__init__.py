"""Stage 1, the grammar front end: a Lark grammar's text in, checked terminals and parse tables out.

Enters: a grammar source (a shipped name, a ``.lark`` path or text; :mod:`.grammar_load`).
Leaves: lark-compatible rules and terminals (:mod:`.lark_syntax`, :mod:`.lark_rules`), each terminal's byte
DFA (:mod:`.automata` over CPython's regex parser, read only through :mod:`._sre_compat`;
:mod:`.terminals` applies lark's lexer rules), the checks that refuse an empty language or a missing start
rule (:mod:`.grammar_checks`), and LALR parse tables with lark's Indenter as data (:mod:`.lalr`,
:mod:`.parse_tables`).
May import: the standard library, lark, numpy, ``cad_outlines.errors``, ``cad_outlines.grammars`` and the
native core. Nothing of the store, the compiled handle, the matcher or the model layer.
"""
