"""Limits on what one grammar compile may cost (issue 21): each is checked before the work it predicts, and
exceeding one raises ResourceLimitError naming the limit, the value and how to raise it."""

import pytest

from cad_outlines import ResourceLimitError, compile_grammar
from cad_outlines.engine.frontend import terminals
from cad_outlines.limits import DEFAULT_LIMITS, Limits
from tests.helpers import ToyVocab


@pytest.fixture(scope="module")
def vocab():
    return ToyVocab.make()


def _refused(vocab, grammar, limits=None, monkeypatch=None):
    with pytest.raises(ResourceLimitError) as info:
        compile_grammar(grammar, vocab, cache=False, progress=False, limits=limits)
    msg = str(info.value)
    assert info.value.limit in msg and "raise it with" in msg and "\n" not in msg
    return info.value


def test_a_huge_grammar_is_refused_before_it_is_parsed(vocab, monkeypatch):
    """5 MB of grammar text (a single literal): refused on its size, lark's reader never runs."""
    from cad_outlines.engine.frontend import grammar_load

    monkeypatch.setattr(grammar_load, "compile_lark_rules", lambda *a, **k: pytest.fail("parsed"))
    e = _refused(vocab, 'start: A\nA: "' + "x" * 5_000_000 + '"\n')
    assert (e.limit, e.maximum) == ("max_grammar_bytes", DEFAULT_LIMITS.max_grammar_bytes) and e.value > 5_000_000


def test_a_long_literal_is_refused_before_any_automaton(vocab, monkeypatch):
    """A 50,000-character literal took 25 s and 1.7 GB; now refused, naming the terminal."""
    monkeypatch.setattr(terminals, "_compile_terminal", lambda *a, **k: pytest.fail("compiled"))
    e = _refused(vocab, 'start: A\nA: "' + "x" * 50_000 + '"\n')
    assert e.limit == "max_literal_chars" and "terminal A" in str(e) and e.value == 50_000


def test_too_many_terminals(vocab):
    n = 3000  # 4,000 regex terminals took a worker past 8 GB
    g = "start: " + " | ".join(f"T{i}" for i in range(n)) + "\n" + "\n".join(f"T{i}: /x{i}[a-z]+/" for i in range(n))
    e = _refused(vocab, g + "\n")
    assert e.limit == "max_terminals" and e.value == n


def test_dfa_states_name_the_terminal(vocab):
    e = _refused(vocab, "start: A\nA: /[^x]{30000}/\n")  # 4 min to check, 5 to compile
    assert e.limit == "max_dfa_states" and "terminal A" in str(e)
    e = _refused(vocab, "start: A\nA: /[^x]{300}/\n", Limits(max_dfa_states=100))
    assert (e.limit, e.maximum) == ("max_dfa_states", 100)


def test_lexer_configurations_and_store_rows(vocab):
    g = "start: A\nA: /(a|b)*a(a|b){8}/\n"  # the 31-byte {14} form wrote a 404 MB cache file
    assert _refused(vocab, g, Limits(max_lexer_configs=200)).limit == "max_lexer_configs"
    assert _refused(vocab, g, Limits(max_store_rows=100)).limit == "max_store_rows"
    assert _refused(vocab, g, Limits(max_cache_file_bytes=10_000)).limit == "max_cache_file_bytes"
    assert compile_grammar(g, vocab, cache=False, progress=False).vocab_size == vocab.size  # the defaults let it be


def test_the_deadline_stops_a_compile(vocab, monkeypatch):
    """The wall-time limit is checked inside the long loops; a clock that jumps an hour trips it."""
    import itertools

    from cad_outlines import limits

    ticks = itertools.count()
    monkeypatch.setattr(limits.time, "monotonic", lambda: 3600.0 * (next(ticks) > 3))
    e = _refused(vocab, "start: A\nA: /[a-z]{1,40}/\n", Limits(max_compile_seconds=60))
    assert e.limit == "max_compile_seconds" and "compile stopped in" in str(e)


def test_lazy_compiles_are_bounded_too(vocab):
    with pytest.raises(ResourceLimitError) as info:
        compile_grammar("start: A\nA: /(a|b)*a(a|b){8}/\n", vocab, cache=False, progress=False, lazy=True,
                        limits=Limits(max_lexer_configs=200))
    assert info.value.limit == "max_lexer_configs"


def test_limits_from_the_environment():
    env = {"CAD_OUTLINES_MAX_COMPILE_SECONDS": "30", "CAD_OUTLINES_MAX_TERMINALS": "none",
           "CAD_OUTLINES_MAX_GRAMMAR_BYTES": "1000"}
    got = Limits.from_env(env)
    assert (got.max_compile_seconds, got.max_terminals, got.max_grammar_bytes) == (30.0, None, 1000)
    assert got.max_rules == DEFAULT_LIMITS.max_rules
    for bad in ("-1", "nan", "inf", "lots"):
        with pytest.raises(ValueError, match="CAD_OUTLINES_MAX_RULES"):
            Limits.from_env({"CAD_OUTLINES_MAX_RULES": bad})


def test_unbounded_with_none(vocab):
    g = compile_grammar('start: A\nA: "' + "x" * 5000 + '"\n', vocab, cache=False, progress=False,
                        limits=Limits(max_literal_chars=None))
    assert g.vocab_size == vocab.size


def test_one_environment_scheme_for_the_library_and_the_server():
    """ServerLimits embeds Limits: one environment describes a server, every limit CAD_OUTLINES_<NAME>, read by
    one reader; the variables a ServerLimits writes for its compile workers read back to it."""
    from cad_outlines.limits import env_names
    from cad_outlines.serving.limits import ServerLimits

    names = env_names(ServerLimits)
    assert len(names) == len(set(names)) and set(env_names(Limits)) <= set(names)
    assert "CAD_OUTLINES_MAX_COMPILE_SECONDS" in names and "CAD_OUTLINES_COMPILE_TIMEOUT_S" in names
    got = ServerLimits.from_env({"CAD_OUTLINES_MAX_IDS": "1e3", "CAD_OUTLINES_MAX_TERMINALS": "none",
                                 "CAD_OUTLINES_MAX_DFA_STATES": "77", "CAD_OUTLINES_COMPILE_TIMEOUT_S": "2.5",
                                 "CAD_OUTLINES_DATA": "/elsewhere"})  # not a limit, not a MAX_ name: left alone
    assert (got.max_ids, got.compile_timeout_s) == (1000, 2.5)
    assert (got.compile.max_terminals, got.compile.max_dfa_states) == (None, 77)
    assert got.compile.max_rules == DEFAULT_LIMITS.max_rules
    assert ServerLimits.from_env(got.env()) == got
    assert got.env()["CAD_OUTLINES_MAX_TERMINALS"] == "none"


def test_a_misspelled_or_bad_variable_is_named():
    from cad_outlines.errors import SettingError
    from cad_outlines.serving.limits import ServerLimits

    with pytest.raises(SettingError, match="CAD_OUTLINES_MAX_TERMINAL is not a limit") as info:
        ServerLimits.from_env({"CAD_OUTLINES_MAX_TERMINAL": "5"})
    assert "CAD_OUTLINES_MAX_TERMINALS" in str(info.value) and "CAD_OUTLINES_MAX_IDS" in str(info.value)
    with pytest.raises(SettingError, match="CAD_OUTLINES_MAX_EDIT_BODY_BYTES"):  # its name before any release
        ServerLimits.from_env({"CAD_OUTLINES_EDIT_MAX_BODY_BYTES": "5"})
    with pytest.raises(SettingError, match="CAD_OUTLINES_COMPILE_WORKERS.*cannot be removed"):
        ServerLimits.from_env({"CAD_OUTLINES_COMPILE_WORKERS": "none"})
    with pytest.raises(SettingError, match="CAD_OUTLINES_MAX_RULES.*whole number"):
        Limits.from_env({"CAD_OUTLINES_MAX_RULES": "2.5"})
    assert Limits.from_env({"CAD_OUTLINES_MAX_IDS": "5"}) == DEFAULT_LIMITS  # the server's: not read here
