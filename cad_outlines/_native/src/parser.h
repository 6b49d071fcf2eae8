// Incremental LALR over flat tables, with lark's Indenter (INDENT/DEDENT, brackets).
//
// A parser state is three refs: the stack top, the indentation-levels top and the
// bracket depth. Stacks and level lists are persistent linked lists: a ref >= 0 points
// into the matcher's committed pool (append-only, so old states stay valid for
// rollback), a ref < 0 into a per-thread scratch arena that speculative questions push
// into and that is cleared per call. Forking a question's state is copying 12 bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar.h"

namespace cad {

struct Node {
    int32_t value;   // parser state, or an indentation level
    int32_t parent;  // ref, NONE at the bottom
};

struct PState {
    int32_t stack = NONE;
    int32_t levels = NONE;
    int32_t parens = 0;
    bool ok() const { return stack != NONE; }
};

struct Pools {
    std::vector<Node> stack, levels;
};

// Parser operations over one matcher's committed pools plus a scratch arena.
class Parser {
public:
    Parser(const Grammar& g, const Pools& committed, Pools& scratch) : g_(g), c_(committed), s_(scratch) {}

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
    int32_t push(int32_t parent, int32_t value, bool stack) const {
        auto& v = stack ? s_.stack : s_.levels;
        v.push_back({value, parent});
        return -int32_t(v.size());
    }
    const Grammar& g_;
    const Pools& c_;
    Pools& s_;
};

// Copy the scratch part of a state into the committed pools (so it outlives the call).
PState materialize(const PState& st, Pools& committed, const Pools& scratch);

}  // namespace cad
