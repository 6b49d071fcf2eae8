// Terminal DFAs over bytes: a code-point DFA's transitions expanded to UTF-8, and the
// minimisation with canonical state numbering. The native form of engine/automata.py's
// _to_bytes (the byte expansion) and minimize_arrays.
#pragma once

#include <cstdint>
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

}  // namespace cad
