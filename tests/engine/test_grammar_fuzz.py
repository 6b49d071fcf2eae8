"""The grammar fuzzer with lark as the oracle (issue 29), as a seeded CI slice, and the disagreements it found,
minimised, as regression cases. The full study: ``python -m analysis grammar-fuzz`` (docs/results/grammar_fuzz.md).

Every case is decided by lark (LALR, basic lexer) and by the engine teacher-forced with GPT-2's tokens and byte
by byte, EOS at the end (analysis/lark_oracle.py)."""

import pytest

from analysis.grammar_fuzz import FuzzConfig, Tokenizers, compile_engine, fuzz_grammar
from analysis.lark_oracle import EngineSide, LarkSide, check_case, judge_refusal
from cad_outlines.errors import GrammarCompileError

SLICE_GRAMMARS = 300  # about 40 s of one core (the suite runs twice in CI)


@pytest.fixture(scope="module")
def tokenizers():
    return Tokenizers(["gpt2"])


# (what was wrong, grammar, texts): each text must get lark's verdict from the engine, lazily and eagerly compiled
REGRESSIONS = [
    # lark decides whether a lexeme is dropped by the terminal that matched it, before the "unless" retyping: a
    # regex terminal that is not ignored, matching exactly the text of an ignored string terminal, passes that
    # string's type to the parser (here: an unexpected token), where the engine dropped it as ignored
    ("a lexeme retyped to an ignored string is not dropped",
     'start: \na: A b\nb: a | "z"\nA: /[^a-c]/\n%ignore " "\n', [" ", "  ", "", "x"]),
    # ... and an ignored regex terminal whose text equals a string terminal's is dropped
    ("an ignored lexeme retyped to a string is dropped", 'start: "a"*\n%ignore /[ab]/\n', ["a", "b", "ab", "ba", ""]),
    ("a string terminal kept beside an ignored regex", 'start: B*\nB: "b"\nA: /[ab]/\n%ignore "a"\n',
     ["a", "b", "ab", "ba", ""]),
    # the runtime lexer's constraint runs come in the order it advanced them, the eager store held them sorted:
    # the configuration after " F" was "missing from the store" (RuntimeError) in the eager grammar
    ("a configuration's constraint runs are a set",
     'start: T2 (T2 T3* | [T2] "andis"i*) "@"+\n'
     'T2: /(\\w[^\\n](?:[ \\t][A-Z][ \\t]|[0-9][A-Z]??)|(?:\\w[^a-c].|do{1,3}[^\\n]\\d)|\\()[^a-c]/\n'
     'T3: /(?i:.((?:[a-z0-9_][a-z0-9_]|[^a-c]*?|"[\\u00e0-\\u00ff]end)??a([a-z]))(?:(a[a-z0-9_])|'
     '([ \\t][a-z0-9_]{1,3}[\\u00e0-\\u00ff])|([ \\t]{0,2})))/i\n%ignore /[ \\t]+/\n',
     [" F8", "dod7T0H6z+>ZsAz F89@", "ab1Cxyz@", ""]),
    # a comment ending the text is a _NEWLINE with no line break: lark's Indenter fails on it outside brackets
    # but drops it inside them (before reading its indentation); the engine refused it there too (a python.lark
    # mutation whose file_input may end with "{")
    ("a NEWLINE without a line break inside brackets",
     'start: (_NEWLINE | stmt)* "{"?\nstmt: NAME _NEWLINE\nNAME: /[a-z]+/\nCOMMENT: /#[^\\n]*/\n'
     '_NEWLINE: ( /\\r?\\n[\\t ]*/ | COMMENT )+\n%ignore /[\\t ]+/\n%declare _INDENT _DEDENT\n',
     ["{#", "{#c", "x\n{#c", "#", "x #c", "x\n#c", "x\n", "{", "{#\n"]),
]


@pytest.mark.parametrize("what, grammar, texts", REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_fuzzer_regressions(what, grammar, texts, tokenizers):
    lark_side = LarkSide(grammar)
    for lazy in (True, False):
        engine = EngineSide(compile_engine(grammar, tokenizers.vocab["gpt2"], lazy=lazy), tokenizers.encode["gpt2"],
                            tokenizers.byte_ids["gpt2"])
        for text in texts:
            out = check_case(lark_side, engine, text)
            assert not out.problems, (what, text, out)


def test_a_seeded_slice_of_the_fuzzer_agrees_with_lark(tokenizers):
    config = FuzzConfig(minimise=False)
    problems, cases, fuzzed = [], 0, 0
    for index in range(SLICE_GRAMMARS):
        res = fuzz_grammar(29, index, tokenizers, config)
        problems += res.problems
        cases += res.cases
        fuzzed += res.status == "fuzzed"
    assert not problems, problems[:3]
    assert fuzzed > SLICE_GRAMMARS // 4 and cases > 20 * fuzzed  # the slice really decides texts


def test_a_refusal_counts_only_if_the_docs_give_it_and_a_loop_only_if_lark_loops(tokenizers):
    looping = '!start: (a+)*\n!a.1: "A" |\n'
    with pytest.raises(GrammarCompileError) as info:
        compile_engine(looping, tokenizers.vocab["gpt2"])
    assert judge_refusal(info.value, looping, LarkSide(looping)) == ("parser loops", None)
    fine = 'start: "a"+\n'  # the same words said of a grammar lark parses: a problem
    category, problem = judge_refusal(info.value, fine, LarkSide(fine))
    assert category == "parser loops" and "lark's does not" in problem
    category, problem = judge_refusal(ValueError("need at least one array to concatenate"), fine, LarkSide(fine))
    assert category == "undocumented" and "concatenate" in problem
