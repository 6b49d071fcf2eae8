// Incremental LALR over flat tables, with lark's Indenter (INDENT/DEDENT, brackets).
//
// A parser state is three refs: the stack top, the indentation-levels top (or, in a grammar
// with object guards, the open objects' frames: the required names each has seen) and the
// bracket depth. Stacks and level lists are persistent linked lists: a ref >= 0 points
// into the matcher's committed pool (append-only, so old states stay valid for
// rollback), a ref < 0 into a per-thread scratch arena that speculative questions push
// into and that is cleared per call. Forking a question's state is copying 16 bytes.
//
// Every call spends from a Budget (reductions, stack depth, scratch nodes): a grammar whose
// parser would reduce forever, or a stack that grows past its limit, throws LimitExceeded
// instead of running on (the matcher turns it into its sticky error).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar.h"

namespace cad {

struct Node {
    int32_t value;   // parser state, an indentation level, or an object frame's names seen (bits)
    int32_t parent;  // ref, NONE at the bottom
};

struct PState {
    int32_t stack = NONE;
    int32_t levels = NONE;
    int32_t parens = 0;
    int32_t depth = 0;  // elements on the stack
    bool ok() const { return stack != NONE; }
};

// What one call (a mask, or one token of an advance or validate) may spend.
struct Budget {
    int64_t reductions = 0;
    int64_t max_reductions = INT64_MAX;
    int64_t max_depth = INT64_MAX;
    size_t max_scratch_nodes = SIZE_MAX;  // stack + level nodes pushed into the scratch arena
    int64_t base_bytes = 0;               // the matcher's committed bytes (reported with the arena's)
};

// A limit of the matcher exceeded: the Limits field, the value reached, the limit.
struct LimitExceeded {
    const char* limit;
    int64_t value, maximum;
};

struct Pools {
    std::vector<Node> stack, levels;
};

// Parser operations over one matcher's committed pools plus a scratch arena.
class Parser {
public:
    Parser(const Grammar& g, const Pools& committed, Pools& scratch, Budget& budget)
        : g_(g), c_(committed), s_(scratch), b_(budget) {}

    // Shift one terminal after all reductions it triggers; false = rejected (st unchanged).
    bool feed(PState& st, int32_t term) const;
    // One lexed item: a terminal, or the NEWLINE terminal with its indentation (under an
    // indenter); expands into INDENT/DEDENT like lark's Indenter. False = rejected.
    bool step(PState& st, int32_t term, int32_t indent) const;
    // One store element: a label id, or INDENT_BASE-encoded NEWLINE (absolute indent).
    bool step_elem(PState& st, int32_t elem) const;
    // `st` then a NEWLINE whose indentation is not known yet.
    bool accepts_newline_after(const PState& st) const;
    // Would END be accepted (the text so far is a complete sentence)?
    bool accepts_end(const PState& st) const;

    int32_t top_state(int32_t ref) const { return node(ref, true).value; }

    const Node& node(int32_t ref, bool stack) const {
        return ref >= 0 ? (stack ? c_.stack[ref] : c_.levels[ref]) : (stack ? s_.stack[-ref - 1] : s_.levels[-ref - 1]);
    }

private:
    // An object guard's rule reduced (grammar.h p_rule_guard) on the frames top `lv`; false = refused.
    bool guard(int32_t& lv, int32_t code) const;
    int32_t push(int32_t parent, int32_t value, bool stack) const {
        auto& v = stack ? s_.stack : s_.levels;
        if (s_.stack.size() + s_.levels.size() >= b_.max_scratch_nodes)
            throw LimitExceeded{"max_matcher_bytes",
                                b_.base_bytes + int64_t((s_.stack.size() + s_.levels.size() + 1) * sizeof(Node)),
                                b_.base_bytes + int64_t(b_.max_scratch_nodes * sizeof(Node))};
        v.push_back({value, parent});
        return -int32_t(v.size());
    }
    int32_t deeper(int32_t depth) const {
        if (++depth > b_.max_depth) throw LimitExceeded{"max_parser_stack_depth", depth, b_.max_depth};
        return depth;
    }
    const Grammar& g_;
    const Pools& c_;
    Pools& s_;
    Budget& b_;
};

// Copy the scratch part of a state into the committed pools (so it outlives the call).
PState materialize(const PState& st, Pools& committed, const Pools& scratch);

}  // namespace cad
