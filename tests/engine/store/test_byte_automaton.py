"""The native byte automaton (``_native/src/byte_automaton.cpp``) that lazy grammars are
built from equals the Python reference (``lexer_index.ByteAutomaton`` and ``Lexer``):
the same configurations, the same edges on every byte, the same entered labels and ends."""

import pytest

from cad_outlines import grammar_path
from cad_outlines.engine.compile import _grammar_phases
from cad_outlines.engine.compile_profile import CompileProfile
from cad_outlines.engine.compiled_grammar import CompiledGrammar
from cad_outlines.engine.store.flat_grammar import lazy_lexer_arrays
from cad_outlines.engine.store.lexer import BOUNDARY, Lexer
from cad_outlines.engine.reference.store_builder import byte_automaton
from tests.helpers import JSON, ToyVocab
from tests.helpers import LOOKAHEAD
from tests.helpers import PY

GRAMMARS = {"json": JSON, "py": PY, "copy_edit": grammar_path("copy_edit"), "lookahead": LOOKAHEAD, "sql": "sql"}


@pytest.mark.parametrize("name", list(GRAMMARS))
def test_native_byte_automaton_equals_python(name):
    _, _, spec, tables, indenter = _grammar_phases(GRAMMARS[name], None, (), "auto", CompileProfile())
    auto = byte_automaton(Lexer(spec))
    lexer = Lexer(spec, table=auto.table)
    lexer.prime_viable(auto.viable_labels())
    g = CompiledGrammar(ToyVocab.make(), Lexer(spec), None, tables, indenter)
    a, meta = lazy_lexer_arrays(g)
    n = len(a["c_owner"])
    assert n == auto.n_states == meta["n_configs"]
    off = [int(x) for x in a["l_auto_off"]]

    def py_key(c):
        cfg = auto.table[c]
        state = 0 if cfg.owner == BOUNDARY else off[cfg.owner] + cfg.state
        return cfg.owner, state, tuple(sorted(off[j] + u for j, u in cfg.cons))

    def native_key(q):
        cons = a["c_cons"][a["c_cons_off"][q]: a["c_cons_off"][q + 1]]
        return int(a["c_owner"][q]), int(a["c_state"][q]), tuple(int(x) for x in cons)

    py_id = {py_key(c): c for c in range(n)}
    to_py = [py_id[native_key(q)] for q in range(n)]  # every native configuration is a Python one
    assert to_py[0] == lexer.initial
    assert sorted(to_py) == list(range(n))
    for q, c in enumerate(to_py):
        for b in range(256):
            k = q * (int(a["a_class"].max()) + 1) + int(a["a_class"][b])  # edges per (state, byte class)
            lo, hi = a["a_ptr"][k], a["a_ptr"][k + 1]
            native = sorted((to_py[a["a_nxt"][e]], int(a["a_lab"][e]), int(a["a_kind"][e]), bool(a["a_ends_nl"][e]))
                            for e in range(lo, hi))
            python = sorted((int(auto.nxt[e]), int(auto.lab[e]), int(auto.kind[e]), bool(auto.ends_nl[e]))
                            for e in auto.edges(c, b))
            assert native == python, (name, q, b)
        entered = lexer.entered(c)
        got = tuple(int(x) for x in a["c_entered"][a["c_entered_off"][q]: a["c_entered_off"][q + 1]])
        assert (got if a["c_entered_valid"][q] else None) == entered
        e = int(a["c_ent"][q])
        assert (e < 0) == (entered is None)
        if e >= 0:
            assert tuple(int(x) for x in a["e_labels"][a["e_off"][e]: a["e_off"][e + 1]]) == entered
        final = lexer.final_labels(c)
        assert a["c_final"][q] == (-2 if final is None else -1 if not final else -3 if final[0] is None else final[0])
        assert bool(a["a_in_nl"][q]) == bool(auto.in_nl[c])


def test_configuration_limit_is_a_clear_error():
    _, _, spec, tables, indenter = _grammar_phases(JSON, None, (), "auto", CompileProfile())
    g = CompiledGrammar(ToyVocab.make(), Lexer(spec), None, tables, indenter)
    from cad_outlines._native import core
    from cad_outlines.engine.store.flat_grammar import _lexer_arrays

    out, meta = {}, {}
    _lexer_arrays(g, out, meta)
    with pytest.raises(ValueError, match="more than 5 configurations"):
        core().byte_automaton(out, meta, max_states=5)
