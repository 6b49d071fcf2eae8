// Terminal DFAs over bytes: a code-point DFA's transitions expanded to UTF-8, the
// minimisation with canonical state numbering, the "unless" product and a terminal's lexer
// tables. The native form of engine/automata.py's _to_bytes (the byte expansion) and
// minimize_arrays, engine/terminals.py's _unless_product and engine/lexer.py's
// TerminalAutomaton.build.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace cad {

// Expand a code-point DFA to bytes. State s's transitions are the sorted, disjoint
// half-open code-point intervals [lo[i], hi[i]) -> tgt[i] for i in iv_off[s]..iv_off[s+1].
// Returns the (m x 256) table, m >= n: states 0..n-1 keep their numbers, the rest are
// continuation-byte nodes, hash-consed. Overlong forms and surrogates never appear.
std::vector<int32_t> utf8_expand(int32_t n, const int64_t* iv_off, const int64_t* lo, const int64_t* hi,
                                 const int32_t* tgt);

struct MinimalDfa {
    int32_t n = 0;
    std::vector<int32_t> trans;  // n x 256, -1 dead
    std::vector<int64_t> label;  // per state, >= 0 accepting
    std::vector<uint8_t> block;  // n x 256 (empty: no state blocks any byte)
};

// Trim (unreachable and dead states), Moore-minimise and number states breadth-first from
// state 0, bytes in increasing order. States with different labels or block rows stay
// apart. `block` may be null. With no live start state: one state, no edges, label -1.
MinimalDfa minimize_dfa(int32_t m, const int32_t* trans, const int64_t* label, const uint8_t* block);

// A regex terminal's DFA refined by the string terminals it "unless"-retypes (lark's
// _create_unless), minimised as above: label 0 where the regex DFA accepts, 1 + q where
// string q (the first, in order) accepts too, -1 elsewhere; the regex DFA's block rows. The
// regex DFA is (n x 256) `trans`, `accept`, `block` (may be null); string q is
// (strs[q] x 256) `str_trans[q]`, `str_accept[q]`.
MinimalDfa unless_product(int32_t n, const int32_t* trans, const uint8_t* accept, const uint8_t* block,
                          const std::vector<const int32_t*>& str_trans, const std::vector<const uint8_t*>& str_accept);

// Which accepting outcomes the pairs of states of two byte DFAs (-1 dead) reachable from (0, 0)
// show, with either alive: bit 0 a accepts alone, bit 1 b alone, bit 2 both; stops once all three
// are seen (all a relation between the two languages needs). Second: pairs walked, -1 past max_pairs,
// -2 where a transition read leads past its DFA's states.
std::pair<int32_t, int64_t> pair_outcomes(int32_t na, const int32_t* ta, const uint8_t* aa, int32_t nb,
                                          const int32_t* tb, const uint8_t* ab, int64_t max_pairs);

struct TerminalTables {
    int32_t m = 0;                // states: the DFA's n, then its shadows, then the dead sink m
    std::vector<int32_t> trans;   // (m + 1) x 256, no -1
    std::vector<int32_t> label;   // m + 1
    std::vector<uint8_t> live;    // m + 1: an accepting state is reachable in one or more steps
    std::vector<uint8_t> block;   // (m + 1) x 256
    std::vector<uint8_t> blocked; // m + 1: any byte blocks
    std::vector<int32_t> shadow;  // m + 1: a non-accepting copy of each blocked accepting state
};

// A terminal DFA (n x 256, -1 dead; `block` may be null) as the lexer's tables: a shadow
// state for each accepting state with a block row (a copy, not accepting, no block row),
// and a dead sink that every missing transition leads to.
TerminalTables terminal_tables(int32_t n, const int32_t* trans, const int32_t* label, const uint8_t* block);

}  // namespace cad
