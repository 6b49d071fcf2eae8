"""The scalar lexer run: a TEST REFERENCE for the byte automaton and the native lexer (decoding never runs it)."""

from __future__ import annotations

from ..store.lexer import BOUNDARY, NO_LINE_BREAK, Config, Lexer, encode_indent, indent_step

__all__ = ["run_lexer"]


def run_lexer(lexer: Lexer, cfg_id: int, data: bytes, acc: int = 0) -> list[tuple[int, tuple[int, ...], int]]:
    """Every (config id, non-ignored labels emitted, indentation) reachable by
    reading `data`. `acc` is the indentation of the NEWLINE lexeme in progress (if
    the config is in one); emitted NEWLINE labels carry their absolute indentation
    (see :func:`encode_indent`) when the spec has an indenter."""
    spec = lexer.spec
    ignored, nl_owner, nl_label, tab = spec.ignored, spec.indent_owner, spec.indent_label, spec.tab_len
    frontier: dict[tuple[Config, tuple[int, ...], int], None] = {(lexer.table[cfg_id], (), acc): None}
    for b in data:
        nxt: dict[tuple[Config, tuple[int, ...], int], None] = {}
        for cfg, emitted, a in frontier:
            for c2, lab in lexer.step(cfg, b):
                if nl_owner is not None:
                    # the byte went to the lexeme of c2 (continuing) or to the one just ended
                    owner = cfg.owner if cfg.owner != BOUNDARY else (c2.owner if lab is None else None)
                    if owner is None:  # a lexeme started and ended on this byte
                        owner = nl_owner if lab == nl_label else -2
                    a2 = indent_step(a if cfg.owner == nl_owner else NO_LINE_BREAK, b, tab) if owner == nl_owner else 0
                else:
                    a2 = 0
                if lab is None or lab in ignored:
                    e2 = emitted
                elif lab == nl_label:
                    if a2 < 0:  # lark's Indenter cannot read this NEWLINE: no line break in it
                        continue
                    e2 = emitted + (encode_indent(a2, True),)
                else:
                    e2 = emitted + (lab,)
                nxt[(c2, e2, a2 if lab is None else 0)] = None
        frontier = nxt
        if not frontier:
            break
    return [(lexer.table.id(c), e, a) for c, e, a in frontier]
