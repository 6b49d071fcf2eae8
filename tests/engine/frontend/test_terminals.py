"""Terminals -> automata: regex_to_dfa against Python's re, and our lark-order lexer
against lark's basic lexer on real inputs.

Run as a script for the full standard-library comparison:
``python tests/engine/frontend/test_terminals.py --stdlib [--limit N]`` prints the agreement numbers.
"""

from __future__ import annotations

import functools
import glob
import os
import random
import re
import sys
import sysconfig
from pathlib import Path

import lark
import numpy as np
import pytest
from lark.lexer import LexerThread, PatternRE, TerminalDef

from cad_outlines.engine.frontend.automata import ByteDFA, UnsupportedRegex, regex_to_dfa
from cad_outlines.engine.frontend.terminals import (
    GrammarCompileError,
    LexError,
    _compile_terminal,
    compile_terminals,
    lark_order,
    load_grammar,
)
from cad_outlines.engine.store.lexer import lexer_spec_from_lark
from cad_outlines.engine.reference.lexer_run import run_lexer
from tests.fixture_data import SMALL

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


DATA = SMALL  # the grammars and samples are vendored in tests/data (copies of the shared data's)
GRAMMARS = DATA / "grammars"
SAMPLES = GRAMMARS / "outlines/historical/cfg_samples"
needs_data = pytest.mark.skipif(not GRAMMARS.is_dir(), reason="tests/data/grammars not found")

# ---------------------------------------------------------------------------------------
# regex_to_dfa vs re
# ---------------------------------------------------------------------------------------

SPECIAL = "éſKİıßẞΣσςǅ٣²\u2028\u00a0\u3000𝔘中kKsSiI"
BASE = "abcxyz_019 \n\t\"'\\/<>-+.eEjJ*" + SPECIAL

BATTERY: list[tuple[str, int]] = [
    # alternation order, lazy and zero-width repeats (first match != longest match)
    ("abc", 0), ("a|ab", 0), ("a?(ab)?", 0), ("(|a)*", 0), ("(a|)*", 0), ("(?:a|)*?b", 0), ("(a*)*", 0),
    ("(a*)+b?", 0), ("(?:ab|a)(?:bc|c)?", 0), ("x*?y", 0), ("(?:a|b)*?b", 0), ("(a|ab)(c|bcd)(d*)", 0),
    ("(?:(?:a|b)*c)*", 0), ("(?:a|b(?!c))+", 0),
    # classes, categories, unicode
    (r"[^\W\d]\w*", 0), (r"\d+", 0), (r"\s+", 0), (r"\S+", 0), (r"\W", 0), (r"[^\s\d]", 0), (r"(?a)\w+", 0),
    (r"[^\"\\\x00-\x1F\x7F-\x9F]", 0), (r"[\u00e0-\u024f]+", 0), ("[^a-z]", 0),
    # IGNORECASE (Python's case folding, incl. the extra cases: k/K/KELVIN, s/ſ, i/İ/ı, σ/ς)
    ("(?i)k", 0), ("(?i)s+", 0), ("(?i)[a-z]+", 0), ("(?i)[^a-z]", 0), ("(?i)[ubf]?r?", 0), ("(?i:ß)", 0),
    ("(?i)σ", 0), ("(?i)İ", 0), ("(?i)i", 0), ("(?ai)k", 0), ("(?i)[^k]", 0), ("(?i)[\\w]", 0), ("select", re.I),
    # dot and counted repeats
    (".", 0), ("(?s).", 0), (".*", 0), ("x{2,4}", 0), ("(?:ab){1,3}?", 0), ("(?:a|ab){2}", 0),
    ("(?:a?){3,5}", 0), ("(?:|a){2,3}", 0), ("(?:a|){0,3}b", 0), ("a{3}", 0), ("(?:ab){2,}", 0),
    # lookaround that stays exact
    (r'"(?!"").*?(?<!\\)(\\\\)*?"', 0), (r"0(?:_?0)*(?![1-9])|[1-9](?:_?[0-9])*", 0), (r"[+*]|[?](?![a-z])", 0),
    (r"\/(?!\/)(\\\/|\\\\|[^\/])*?\/[imslux]*", 0), (r"\/\*(\*(?!\/)|[^*])*\*\/", 0), (r"a(?!bc)\w+", 0),
    (r"a.(?<=b)c", 0), (r"a.(?<!b)c", 0), (r"a(?=\w)\w+", 0),
    (r"([ubf]?r?|r[ubf])(\"(?!\"\").*?(?<!\\)(\\\\)*?\"|'(?!'').*?(?<!\\)(\\\\)*?')", re.I),
    (r"([ubf]?r?|r[ubf])(\"\"\".*?(?<!\\)(\\\\)*?\"\"\"|'''.*?(?<!\\)(\\\\)*?''')", re.I | re.S),
    # syntax odds and ends
    (r"(?x) a b # comment", 0), (r"\x41\u00e9\U0001d518", 0), (r"(?P<n>a)(?:b)", 0),
]


def _grammar_regexes() -> list[tuple[str, int]]:
    """Every regex terminal of the shipped grammars (as lark compiles it, flags included)."""
    out: dict[tuple[str, int], None] = {}
    keywords = 0
    for path in sorted(GRAMMARS.rglob("*.lark")) + [REPO / "grammars/copy_edit.lark"]:
        if path.name == "bash.lark":
            continue  # lark rejects it (recursive terminal), slowly
        text = path.read_text(encoding="utf-8")
        try:
            paths = [str(path.parent), str(GRAMMARS / "lark")]
            grammar, _ = lark.load_grammar.load_grammar(text, str(path), paths, False)
            # every rule as a start symbol: keeps the terminals rules use (not common.lark's fragments)
            terminals, _, _ = grammar.compile([r[0] for r in grammar.rule_defs if not r[1]], set())
        except Exception:  # noqa: BLE001 - fragments (common.lark) and broken historical grammars
            continue
        for t in terminals:
            if isinstance(t.pattern, PatternRE):
                regexp = t.pattern.to_regexp()
                if re.fullmatch(r"(\(\?:(.)\|(.)\))+", regexp):  # sqlite's 121 keywords: a few will do
                    keywords += 1
                    if keywords > 3:
                        continue
                out[(regexp, 0)] = None
    return list(out)


GRAMMAR_REGEXES = _grammar_regexes()


def _strings(pattern: str) -> st.SearchStrategy[str]:
    alphabet = st.sampled_from(sorted(set(BASE) | {c for c in pattern if c.isprintable()}))
    noise = st.text(alphabet, max_size=10)
    try:
        rx = st.from_regex(re.compile(pattern), fullmatch=True)
        rx.validate()
        # short strings: Python's own backtracking is exponential on nested repeats
        return st.one_of(noise, rx, st.tuples(rx, noise).map("".join)).map(lambda s: s[:16])
    except Exception:  # noqa: BLE001 - hypothesis cannot generate from every construct
        return noise


def _check(pattern: str, flags: int, full: ByteDFA, match: ByteDFA, s: str) -> None:
    rx = re.compile(pattern, flags)
    data = s.encode()
    assert full.fullmatch(data) == (rx.fullmatch(s) is not None), (pattern, s)
    m = rx.match(s)
    assert match.longest_match(data) == (None if m is None else len(m.group().encode())), (pattern, s)


def _run_hypothesis(pattern: str, flags: int, examples: int) -> None:
    """Hypothesis-generated strings (from the regex and from a relevant alphabet), then a
    cheap deterministic batch of 10x as many random short strings."""
    full = regex_to_dfa(pattern, flags)
    match = regex_to_dfa(pattern, flags, semantics="match")
    rng = random.Random(pattern)
    alphabet = sorted(set(BASE) | {c for c in pattern if c.isprintable()})
    for _ in range(10 * examples):
        _check(pattern, flags, full, match, "".join(rng.choices(alphabet, k=rng.randint(0, 8))))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_strings(pattern))
    def run(s: str) -> None:
        _check(pattern, flags, full, match, s)

    run()


@pytest.mark.parametrize("pattern,flags", BATTERY, ids=[p for p, _ in BATTERY])
def test_regex_battery_matches_python_re(pattern, flags):
    _run_hypothesis(pattern, flags, 30)


@needs_data
@pytest.mark.parametrize("pattern,flags", GRAMMAR_REGEXES, ids=[p[:40] for p, _ in GRAMMAR_REGEXES])
def test_grammar_terminal_regexes_match_python_re(pattern, flags):
    _run_hypothesis(pattern, flags, 12)


def test_no_cased_code_points_above_the_case_table():
    import _sre

    from cad_outlines.engine.frontend.automata import _CASED_LIMIT

    assert not any(_sre.unicode_iscased(c) for c in range(_CASED_LIMIT, 0x110000))


def test_first_match_differs_from_longest():
    # Python takes the first alternative; the DFA of match results knows it
    assert regex_to_dfa("a|ab", semantics="match").longest_match(b"ab") == 1
    assert regex_to_dfa("a|ab").longest_match(b"ab") == 2
    lazy = regex_to_dfa('".*?"', semantics="match")
    assert lazy.longest_match(b'"a" "b"') == 3
    # sre's zero-width rule: (|a)* stops after an empty iteration
    assert regex_to_dfa("(|a)*", semantics="match").longest_match(b"aa") == 0
    assert regex_to_dfa("(a|)*", semantics="match").longest_match(b"aa") == 2


def test_trailing_lookahead_blocks_the_next_byte():
    dec = regex_to_dfa(r"0(?:_?0)*(?![1-9])|[1-9](?:_?[0-9])*", semantics="match")
    assert dec.block is not None
    assert [dec.longest_match(x) for x in (b"0", b"01", b"001", b"0_01", b"0 ", b"12x")] == [1, None, 1, 1, 1, 2]
    s = dec.step(0, b"0")
    assert dec.accepts_at(s) and dec.accepts_at(s, ord("x")) and not dec.accepts_at(s, ord("1"))
    assert dec.fullmatch(b"0")  # end of text never blocks


def test_bytedfa_helpers_and_utf8():
    d = regex_to_dfa(r"[^\W\d]\w*")
    assert d.trans.dtype.name == "int32" and d.trans.shape == (d.n_states, 256)
    assert d.live.all()
    assert d.fullmatch("héllo_中".encode()) and not d.fullmatch(b"1abc")
    assert d.longest_match("ab-c".encode()) == 2
    assert d.longest_match("xé".encode(), pos=1) == 2  # é is two bytes
    assert d.step(0, b"\xff") == -1  # never valid UTF-8
    dot = regex_to_dfa("(?s).")
    assert dot.fullmatch("\U0010ffff".encode()) and dot.fullmatch(b"\n")
    assert not dot.fullmatch(b"\xed\xa0\x80")  # surrogates are not encodable: excluded
    assert not dot.fullmatch(b"\xc0\x80") and not dot.fullmatch(b"\xe0\x80\x80")  # overlong forms
    assert not regex_to_dfa(".").fullmatch(b"\n")
    empty = regex_to_dfa("a*")
    assert empty.accept[0] and empty.longest_match(b"b") == 0
    assert regex_to_dfa("(?i)k").equivalent(regex_to_dfa("[kK\u212a]"))


@pytest.mark.parametrize("pattern,construct,position", [
    (r"a(?=b)", "lookahead (?=...)", 1),
    (r"(a)\1", "backreference", 3),
    (r"(?P<x>a)(?P=x)", "backreference", 8),
    (r"(a)?(?(1)b|c)", "conditional (?(...)...)", 4),
    (r"^a", "anchor ^", 0),
    (r"a$", "anchor $", 1),
    (r"\bword", "word boundary \\b", 0),
    (r"(?>ab)", "atomic group (?>...)", 0),
    (r"a*+", "possessive repeat", 1),
    (r"x(?<=ab)", "lookbehind (?<=...)", 1),
    (r"(?<!a)b", "lookbehind (?<!...)", 0),
    (r"a(?!bc)", "lookahead (?!...)", 1),  # needs two characters past the match
    (r"a(?=(?!b)c)", "lookahead (?!...)", 4),
])
def test_unsupported_constructs_raise(pattern, construct, position):
    with pytest.raises(UnsupportedRegex) as info:
        regex_to_dfa(pattern, semantics="match")
    assert info.value.construct == construct and info.value.position == position


# ---------------------------------------------------------------------------------------
# terminals and the lark-order lexer
# ---------------------------------------------------------------------------------------


@functools.cache
def _grammar(name: str, start: str | None = None):
    """(lark, TerminalSet) of a shipped grammar ("copy_edit" or a path under grammars/)."""
    path = REPO / "grammars/copy_edit.lark" if name == "copy_edit" else GRAMMARS / name
    lk = load_grammar(path, start=start)
    return lk, compile_terminals(lk)


def _lark_tokens(lexer, text: str):
    try:
        return [(t.type, t.value) for t in LexerThread.from_text(lexer, text).lex(None)], None
    except lark.exceptions.UnexpectedCharacters as e:
        return None, e.pos_in_stream


def _our_tokens(ts, text: str):
    try:
        return ts.lex(text, dont_ignore=True), None
    except LexError as e:
        return None, e.pos


def _assert_same_lexing(lk: lark.Lark, ts, texts) -> int:
    """Token types and values, ignored ones included, or the error position; returns how
    many texts lexed."""
    lexer = lk._build_lexer(dont_ignore=True)
    lexed = 0
    for text in texts:
        ours, ours_err = _our_tokens(ts, text)
        theirs, their_err = _lark_tokens(lexer, text)
        assert (ours, ours_err) == (theirs, their_err), text[:200]
        lexed += ours is not None
    return lexed


TOY = r"""
start: (DEF | IF | NAME | NUMBER | STRING | OP)*
DEF: "def"
IF: "if"i
NAME: /[a-z_]\w*/
NUMBER: /0(?![1-9])|[1-9][0-9]*/
STRING: /"(?!"").*?(?<!\\)(\\\\)*?"|\"\"\"(?s:.*?)\"\"\"/
OP: "+" | "+=" | "=" | "=="
%ignore " "
"""


def test_toy_grammar_rules():
    lk = load_grammar(TOY)
    ts = compile_terminals(lk)
    assert [t.name for t in ts.terminals] == [t.name for t in lark_order(lk.terminals)]
    assert ts.unless == {"NAME": ("DEF", "IF")}
    assert "DEF" not in ts.scanner and "IF" in ts.scanner  # "if"i has flags the regex lacks
    assert ts.lex("def define if IF x+=1") == [
        ("DEF", "def"), ("NAME", "define"), ("IF", "if"), ("IF", "IF"), ("NAME", "x"), ("OP", "+="), ("NUMBER", "1")]
    assert [(x.type, x.start, x.end, x.ignored) for x in ts.scan('"é" x')] == [
        ("STRING", 0, 3, False), ("__IGNORE_0", 3, 4, True), ("NAME", 4, 5, False)]  # character offsets
    assert [(x.start, x.end, x.ignored) for x in ts.scan("ab  _c")] == [
        (0, 2, False), (2, 3, True), (3, 4, True), (4, 6, False)]
    with pytest.raises(LexError) as info:
        ts.lex("ab\n cé")
    assert info.value.pos == 2 and "line 1 column 3" in str(info.value)
    texts = ['def x', 'define', 'IF if iF', '""', '"a\\"b" "c"', '"""doc"""', '""+""', '0 10 0', '01', '"a\\\\"',
             'x==y', '+++=', '"unterminated', '"""x"', 'a\tb', 'é']
    assert _assert_same_lexing(lk, ts, texts) >= 8
    assert ts["STRING"].first_match_differs and ts["STRING"].dfa.block is not None
    assert not ts["NAME"].first_match_differs


def test_labeled_dfa_bakes_in_unless():
    ts = compile_terminals(load_grammar(TOY))
    trans, labels, block = ts.labeled("NAME")
    dfa = ByteDFA(trans, np.array([x is not None for x in labels]))

    def label(s: bytes):
        st_ = dfa.step(0, s)
        return labels[st_] if st_ >= 0 else None

    # "IF" does not match NAME at all (it lexes through the IF terminal, kept in the scanner)
    got = [label(x) for x in (b"def", b"define", b"if", b"IF", b"de", b"1")]
    assert got == ["DEF", "NAME", "IF", None, "NAME", None]


def test_zero_width_and_error_messages():
    with pytest.raises(GrammarCompileError, match="zero-width"):
        _compile_terminal(TerminalDef("EMPTY", PatternRE("a*")), 0, False)
    with pytest.raises(GrammarCompileError) as info:
        compile_terminals(load_grammar('start: FOO\nFOO: /ab(?=c)/'))
    assert str(info.value) == ("terminal FOO: lookahead (?=...) at offset 2 cannot be compiled to a DFA: "
                               "a positive lookahead is still pending at the end of the match")
    with pytest.raises(GrammarCompileError) as info:
        compile_terminals(load_grammar('start: BAR\nBAR: /(a)b\\1/i'))
    assert info.value.terminal == "BAR" and info.value.construct == "backreference" and info.value.position == 4
    assert str(info.value).startswith("terminal BAR: backreference at offset 4 cannot be compiled to a DFA")


def _spec_lexings(lk: lark.Lark, text: str) -> set[tuple[str, ...]]:
    """Complete lexings of `text` by the engine's config lexer over our LexerSpec."""
    from cad_outlines.engine.store.lexer import Lexer

    spec = lexer_spec_from_lark(lk)
    lexer = Lexer(spec)
    out = set()
    for cfg, emitted, _ in run_lexer(lexer, lexer.initial, text.encode()):
        final = lexer.final_labels(cfg)
        if final is not None:
            out.add(tuple(spec.labels[i] for i in (*emitted, *(x for x in final if x is not None))))
    return out


def test_lexer_spec_from_lark_agrees_with_lex():
    lk = load_grammar(TOY)
    ts = compile_terminals(lk)
    spec = lexer_spec_from_lark(lk)
    assert [a.name for a in spec.automata[: spec.n_terminals]] == list(ts.scanner)
    for text in ["def define if", 'x = ""', '"""a"""+1', "0 10", '"a\\"b"']:
        assert _spec_lexings(lk, text) == {tuple(t for t, _ in ts.lex(text))}, text
    assert _spec_lexings(lk, "01") == set()
    copy_edit, ts = _grammar("copy_edit")
    text = '<copy lines="1-2"/>\n<gen>a</ge</gen></program>'
    assert _spec_lexings(copy_edit, text) == {tuple(t for t, _ in ts.lex(text))}


LOADABLE = [
    "lark/examples/csv.lark", "lark/examples/json.lark", "lark/examples/template_lark.lark",
    "lark/examples/verilog.lark",
    "lark/lark.lark", "outlines/arithmetic.lark", "outlines/json.lark", "outlines/historical/csv.lark",
    "outlines/historical/lark.lark", "outlines/historical/lisp.lark", "outlines/historical/sql_select.lark",
    "syncode/calc.lark", "syncode/json.lark", "syncode/sql.lark", "syncode/tiny.lark",
]  # the python grammars are covered below (their LALR tables take seconds)


@needs_data
@pytest.mark.parametrize("grammar", LOADABLE + ["copy_edit"])
def test_grammar_order_and_unless_match_lark(grammar):
    lk, ts = _grammar(grammar)
    lexer = lk._build_lexer()
    terms, callbacks = lark.lexer._create_unless(lexer.terminals, lexer.g_regex_flags, lexer.re, lexer.use_bytes)
    assert [t.name for t in ts.terminals] == [t.name for t in lexer.terminals]
    assert list(ts.scanner) == [t.name for t in terms]
    assert ts.unless == {k: tuple(t.name for t in v.scanner.terminals) for k, v in callbacks.items()}


@needs_data
@pytest.mark.parametrize("grammar,samples", [
    ("outlines/json.lark", "json/*.test"), ("lark/examples/json.lark", "json/*.test"),
    ("syncode/json.lark", "json/*.test"),
    ("outlines/historical/sql_select.lark", "sql_select/*.test"), ("syncode/sql.lark", "sql_select/*.test"),
    ("outlines/arithmetic.lark", "arithmetic/*.test"), ("syncode/calc.lark", "arithmetic/*.test"),
    ("outlines/historical/csv.lark", "csv/*.test"), ("lark/lark.lark", "lark/*.test"),
])
def test_lexing_samples_agrees_with_lark(grammar, samples):
    lk, ts = _grammar(grammar)
    texts = [Path(f).read_text(encoding="utf-8") for f in sorted(glob.glob(str(SAMPLES / samples)))]
    texts += [t[: len(t) // 2] for t in texts] + ["", " ", "@", '"\\u00e9"']
    assert texts
    _assert_same_lexing(lk, ts, texts)


def test_copy_edit_programs_agree_with_lark():
    from cad_outlines import oracle_program
    from cad_outlines.examples import load_examples

    lk, ts = _grammar("copy_edit")
    texts = [oracle_program(ex.before, ex.after).to_text().removeprefix("<program>") for ex in load_examples()]
    texts += ['<gen></ge</gen></program>', '<gen><</gen>', '<gen></gen</gen>', '<copy lines="01-2"/>',
              '<copy lines="3-10"/>\n\n</program>', '<gen>é\n</gen>']
    assert _assert_same_lexing(lk, ts, texts) >= len(texts) - 2


# ---------------------------------------------------------------------------------------
# python.lark on the standard library (raw basic-lexer stream, no Indenter)
# ---------------------------------------------------------------------------------------

PY_SNIPPETS = [
    'x = ""\ny = """doc\n"""\nz = \'\'\'a\'\'\'\n', 'r"\\\\" b"x" rb\'y\' F"z" Rb"w" u"q"', '"a\\"b" \'c\\\\\'',
    "0 00 0_0 1_000 0x_1f 0o7 0b1 1.5e-3 1j .5 5.", "01", "0_01", "def define(async_, match, case): pass",
    "a = b if c else d  # comment\n\\\n  x", "lambda: None", '"""unterminated', '"x\ny"', "é = 1", "x @= y",
]


@pytest.fixture(scope="module")
def python_lark():
    return _grammar("lark/python.lark", "file_input")


def _stdlib_files() -> list[str]:
    root = sysconfig.get_paths()["stdlib"]
    files = glob.glob(os.path.join(root, "**", "*.py"), recursive=True)
    return sorted(f for f in files if os.path.relpath(f, root).split(os.sep)[0] != "site-packages")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_python_snippets_agree_with_lark(python_lark):
    lk, ts = python_lark
    assert {"STRING", "DEC_NUMBER"} <= {t.name for t in ts.terminals if t.dfa.block is not None}
    _assert_same_lexing(lk, ts, PY_SNIPPETS)


def test_python_stdlib_files_agree_with_lark(python_lark):
    lk, ts = python_lark
    root = sysconfig.get_paths()["stdlib"]
    names = ["textwrap.py", "string.py", "tokenize.py", "json/decoder.py", "email/_header_value_parser.py"]
    texts = [t for t in (_read(os.path.join(root, n)) for n in names) if t is not None]
    assert _assert_same_lexing(lk, ts, texts) == len(texts)


def stdlib_agreement(lk: lark.Lark, ts, files: list[str]) -> dict[str, int]:
    """Lex every file with lark and with us; counts, mismatching files printed."""
    lexer = lk._build_lexer(dont_ignore=True)
    stats = dict(files=0, agree=0, both_lexed=0, both_error=0, mismatch=0, unreadable=0, tokens=0)
    for path in files:
        text = _read(path)
        if text is None:
            stats["unreadable"] += 1
            continue
        stats["files"] += 1
        ours = _our_tokens(ts, text)
        theirs = _lark_tokens(lexer, text)
        if ours == theirs:
            stats["agree"] += 1
            stats["both_lexed" if ours[0] is not None else "both_error"] += 1
            stats["tokens"] += len(ours[0] or ())
        else:
            stats["mismatch"] += 1
            print("MISMATCH", path, ours[1], theirs[1])
    return stats


@pytest.mark.slow
def test_python_stdlib_sample_agrees_with_lark(python_lark):
    """A deterministic sample (all files with CAD_OUTLINES_STDLIB_ALL=1)."""
    lk, ts = python_lark
    files = _stdlib_files()
    if not os.environ.get("CAD_OUTLINES_STDLIB_ALL"):
        files = random.Random(0).sample(files, min(25, len(files)))
    stats = stdlib_agreement(lk, ts, files)
    assert stats["mismatch"] == 0, stats


def main(argv: list[str]) -> None:
    import argparse
    import time

    ap = argparse.ArgumentParser(description="Lex the standard library with lark and with our DFAs")
    ap.add_argument("--stdlib", action="store_true", required=True)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--grammar", default="lark/python.lark")
    args = ap.parse_args(argv)
    lk = load_grammar(GRAMMARS / args.grammar, start="file_input")
    t = time.perf_counter()
    ts = compile_terminals(lk)
    print(f"compiled {len(ts)} terminals in {time.perf_counter() - t:.2f}s")
    files = _stdlib_files()
    if args.limit:
        files = random.Random(0).sample(files, min(args.limit, len(files)))
    t = time.perf_counter()
    print(stdlib_agreement(lk, ts, files), f"{time.perf_counter() - t:.0f}s")


if __name__ == "__main__":
    main(sys.argv[1:])
