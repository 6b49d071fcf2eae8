// The lexer's l_* arrays (engine/store/flat_grammar.py) built natively from terminal tables:
// the native form of engine/store/lexer.py's LexerSpec (guard runs for trailing lookaheads,
// first bytes, starters, competitors) and flat_grammar._spec_arrays, for a front end that hands
// over its terminals as byte DFAs in the lexer's order (JSON Schema), so a compile does not pay
// numpy's per-call costs on dozens of small arrays.
#pragma once

#include <cstdint>
#include <vector>

#include "dfa.h"

namespace cad {

// One terminal's tables as TerminalAutomaton holds them (dfa.h's TerminalTables, states
// 0 .. n-1 with the dead sink last), its accepting states labelled with any label >= 0.
struct TerminalView {
    int32_t n;  // states, dead sink included
    const int32_t* trans;
    const int32_t* label;
    const uint8_t* live;
    const uint8_t* block;
    const uint8_t* blocked;
    const int32_t* shadow;
};

struct LexerArrays {
    std::vector<int32_t> l_auto_off, l_trans, l_label, l_shadow, l_dead, l_guard, l_first, l_starters, l_comp;
    std::vector<uint8_t> l_live, l_block, l_blocked, l_pending, l_comp_none, l_ignored;
    std::vector<int64_t> l_starters_off, l_comp_off;
    int32_t n_terminals = 0, n_labels = 0;
};

// The arrays of terminals `terms` in the lexer's order, terminal i's label i, nothing ignored,
// no indenter (lexer.py: lexer_spec_from_dfas, then flat_grammar.spec_automaton_arrays' l_*);
// `groups` (one per terminal, empty: one group): terminals compete only within their group.
LexerArrays lexer_arrays(const std::vector<TerminalView>& terms, const std::vector<int32_t>& groups = {});

}  // namespace cad
