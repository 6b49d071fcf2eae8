// LALR(1) parse tables from a context-free grammar over int symbols, exactly as lark builds
// them (lark/parsers/lalr_analysis.py, grammar_analysis.py):
//  - the grammar is augmented with `$root -> start` (one start symbol) and its LR(0) item
//    sets are built breadth-first from the start state, symbols in id order (so the
//    numbering is deterministic: the start state is 0);
//  - lookaheads are DeRemer–Pennello's (reads, includes, lookback, two digraph passes), with
//    lark's includes: an A-transition out of p is also "included" by the transitions that
//    walk the rest of p's kernel items A -> α . ω, not only of its A -> . ω items; and
//    lark's digraph, whose sets are shared objects within a cycle of `reads` (a grammar that
//    is not LR(k); lark's own answer there can depend on its set iteration order);
//  - $END is read after the start symbol; the end state holds `$root -> start .`;
//  - reduce/reduce collisions are resolved by rule priority (a unique highest one wins),
//    else reported; shift/reduce as shift;
//  - lark's grammar errors: a rule given twice (origin and expansion), a nonterminal used
//    but given no rule. Either stops the build (nothing else is filled in).
#pragma once

#include <cstdint>
#include <vector>

namespace cad {

// The grammar: symbols 0..n_symbols-1, rules 0..n_rules-1.
struct LalrGrammar {
    int32_t n_symbols = 0;
    const uint8_t* is_term = nullptr;    // per symbol
    int32_t n_rules = 0;
    const int32_t* origin = nullptr;     // per rule: a nonterminal
    const int32_t* rhs_off = nullptr;    // n_rules + 1: rule r's expansion is rhs[rhs_off[r]:rhs_off[r+1]]
    const int32_t* rhs = nullptr;
    const int32_t* priority = nullptr;   // per rule (lark: rule.options.priority or 0)
    int32_t start = 0;                   // a nonterminal
};

struct LalrTables {
    // grammar errors
    std::vector<int32_t> duplicates;     // pairs (earlier rule, rule equal to it)
    std::vector<int32_t> undefined;      // pairs (rule or -1 for the start, nonterminal without rules)
    int32_t end_term = 0;                // the symbol id of $END: n_symbols
    int32_t n_states = 0, start_state = 0, end_state = -1;
    // per state, CSR sorted by symbol: shifts (terminal, next state) and gotos (nonterminal, next state)
    std::vector<int32_t> shift_off, shift_term, shift_to, goto_off, goto_sym, goto_to;
    // per state, CSR sorted by terminal: the reductions left after resolving conflicts
    std::vector<int32_t> reduce_off, reduce_term, reduce_rule;
    // reduce/reduce collisions no priority resolves: (state, terminal), CSR of their rules
    std::vector<int32_t> collision_state, collision_term, collision_off{0}, collision_rules;
    int32_t shift_reduce = 0;            // shift/reduce conflicts resolved as shift
    bool ok() const { return duplicates.empty() && undefined.empty() && collision_state.empty(); }
};

// Throws std::invalid_argument on malformed input (ids out of range, a terminal as origin).
LalrTables build_lalr(const LalrGrammar& g);

}  // namespace cad
