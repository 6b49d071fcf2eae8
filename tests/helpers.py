"""Helpers shared by the test modules: small grammars and a byte-level toy vocabulary, so engine tests need
no tokenizer files. Test modules import these from here, never from each other."""

from __future__ import annotations

from cad_outlines.engine.reference.lexer_run import run_lexer
from cad_outlines.engine.reference.store_builder import TokenBytes, _Indexer
from cad_outlines.engine.vocabulary import Vocabulary

JSON = r"""
?start: value
?value: object | array | STRING | NUMBER | "true" -> true | "false" -> false | "null" -> null
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: STRING ":" value
STRING: /"([^"\\]|\\.)*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/
%ignore /[ \t\n]+/
"""

# A byte-level toy vocabulary: every single byte, plus multi-byte pieces that cross
# lexeme boundaries, so the tests need no tokenizer files.
PIECES = [b'{"', b'":', b'", "', b"true", b"tr", b"ue", b"null", b"12", b"3.", b"e-", b", ", b"[]", b"]}", b'\\"',
          b"  ", b"\n", b'"a"', b"fals", b"<copy", b' lines="', b'"/>', b"<gen>", b"</gen>", b"</program>", b"\n<",
          b"12-", b"3", b"0", b"def", b"de", b"f(", b"):", b"\n    ", b"return", b" x"]


class ToyVocab:
    """Just enough of Vocabulary for the engine: bytes, specials, EOS, hash."""

    @staticmethod
    def make() -> Vocabulary:
        token_bytes = tuple([bytes([b]) for b in range(256)] + PIECES + [b""])
        eos = len(token_bytes) - 1
        return Vocabulary(token_bytes=token_bytes, special_ids=frozenset({eos}), eos_token_ids=(eos,),
                          tokenizer_size=len(token_bytes), scheme="byte_level")



def encode(vocab, text: bytes) -> list[int]:
    """Greedy longest-piece tokenization with the toy vocabulary."""
    index = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    out, pos = [], 0
    while pos < len(text):
        for n in range(min(12, len(text) - pos), 0, -1):
            if text[pos : pos + n] in index:
                out.append(index[text[pos : pos + n]])
                pos += n
                break
    return out



def index_equals_scalar(lexer, vocab) -> set:
    """The vectorised token-level index equals the scalar lexer, token by token, from every
    configuration reachable by whole tokens; returns the configurations seen."""
    from cad_outlines.engine.store.lexer import INDENT_BASE

    tokens = TokenBytes.from_bytes(vocab.token_bytes, vocab.special_ids)
    indexer = _Indexer(lexer, tokens)
    todo, seen = [lexer.initial], {lexer.initial}
    while todo:
        cfg = todo.pop()
        outcomes: dict[int, set] = {}
        for end, emitted, rows in indexer.index(cfg):
            for r in rows:
                outcomes.setdefault(int(tokens.ids[r]), set()).add((end, emitted))
            if end not in seen:
                seen.add(end)
                todo.append(end)
        # from inside a NEWLINE lexeme the index gives the indentation relative to the one
        # carried in (flag 0 unless a line break was read); the scalar run, given 0 carried
        # in, calls it absolute: compare the values
        carried = lexer.table[cfg].owner == lexer.spec.indent_owner

        def norm(em):
            return tuple((x - INDENT_BASE) >> 1 if carried and x >= INDENT_BASE else x for x in em)

        for tok in tokens.ids:
            scalar = {(e, norm(em)) for e, em, _ in run_lexer(lexer, cfg, vocab.token_bytes[tok])}
            got = {(e, norm(em)) for e, em in outcomes.get(int(tok), set())}
            assert scalar == got, (lexer.table[cfg], vocab.token_bytes[tok])
    return seen


LOOKAHEAD = r"""
start: (WORD | NUM | OP)*
WORD: /[a-z]+(?![0-9])/
NUM: /[0-9]+/
OP: "<" | "<=" | "<<"
%ignore " "
"""

PY = r"""
start: (_NEWLINE | stmt)*
?stmt: simple _NEWLINE | compound
simple: NAME "=" expr | "pass" | "return" expr
compound: "if" expr ":" suite | "def" NAME "(" [NAME ("," NAME)*] ")" ":" suite
suite: simple _NEWLINE | _NEWLINE _INDENT stmt+ _DEDENT
?expr: expr "+" atom | expr "-" atom | atom
?atom: NAME | NUMBER | "(" expr ")" | NAME "(" [expr ("," expr)*] ")" | "-" atom
NAME: /[a-z_]+/
NUMBER: /[0-9]+/
_NEWLINE: ( /\r?\n[\t ]*/ | /#[^\n]*/ )+
%ignore /[\t ]+/
%declare _INDENT _DEDENT
"""
