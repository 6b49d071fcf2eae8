// The lexer's configurations as an explicit automaton over bytes, built natively from the
// l_* arrays: the native form of engine/lexer_index.py's ByteAutomaton (plus the
// per-configuration arrays engine/flat_grammar.py's lazy layout needs), so a lazy grammar
// is usable without running the Python lexer over every configuration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "grammar.h"

namespace cad {

// how the indentation of a NEWLINE lexeme moves along an edge (lexer_index.py's _PLAIN, ...)
constexpr uint8_t EDGE_PLAIN = 0, EDGE_NL_GOES_ON = 1, EDGE_NL_STARTS = 2;

struct ByteAutomaton {
    // configurations; 0 is the initial one (between lexemes, no constraint runs)
    std::vector<int32_t> c_owner, c_state, c_cons;  // state: global; cons: CSR, sorted global states
    std::vector<int64_t> c_cons_off;
    // edges, CSR by state * n_classes + a_class[byte] (bytes no automaton state tells apart share
    // a class): successor, label recorded (-1: none or ignored), indentation kind, whether the edge
    // ends a NEWLINE
    std::vector<int64_t> a_ptr;
    std::vector<uint8_t> a_class;  // 256: each byte's class
    int32_t n_classes = 0;
    std::vector<int32_t> a_nxt, a_lab;
    std::vector<uint8_t> a_kind, a_ends_nl, a_in_nl;
    // per configuration: labels the lexeme in progress can end as (CSR, -1 = ignored;
    // valid 0 = it cannot end), how the text may end here (as flat_grammar's c_final),
    // and the id of its entered-label set in e_off/e_labels (-1: it cannot end)
    std::vector<int64_t> c_entered_off;
    std::vector<int32_t> c_entered, c_final, c_ent, e_off, e_labels;
    std::vector<uint8_t> c_entered_valid;
};

// Every configuration reachable from the initial one by bytes. Throws std::length_error
// when there are more than max_states.
ByteAutomaton build_byte_automaton(const Grammar& g, size_t max_states);

}  // namespace cad
