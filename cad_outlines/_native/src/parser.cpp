#include "parser.h"

#include <algorithm>

namespace cad {

bool Parser::feed(PState& st, int32_t term) const {
    if (term < 0 || !st.ok()) return false;
    const int32_t nT = g_.n_terms, nN = g_.n_nonterms;
    int32_t ref = st.stack, depth = st.depth, lv = st.levels;
    while (true) {
        int32_t top = node(ref, true).value;
        int32_t a = g_.p_action[size_t(top) * nT + term];
        if (a == 0) return false;
        if (a > 0) {
            if (g_.has_guards) {
                if (term == g_.guard_open) {
                    lv = push(lv, 0, false);
                } else if (term == g_.guard_close) {
                    lv = node(lv, false).parent;
                    if (lv == NONE) return false;
                }
                st.levels = lv;
            }
            st.depth = deeper(depth);
            st.stack = push(ref, a - 1, true);
            return true;
        }
        if (++b_.reductions > b_.max_reductions)
            throw LimitExceeded{"max_reductions_per_token", b_.reductions, b_.max_reductions};
        int32_t r = -a - 1;
        if (g_.has_guards && g_.p_rule_guard[r] != 0 && !guard(lv, g_.p_rule_guard[r])) return false;
        for (int32_t k = g_.p_rule_len[r]; k > 0; --k) ref = node(ref, true).parent;
        depth -= g_.p_rule_len[r];
        int32_t nxt = g_.p_goto[size_t(node(ref, true).value) * nN + g_.p_rule_lhs[r]];
        if (nxt < 0) return false;
        depth = deeper(depth);
        ref = push(ref, nxt, true);
        if (term == g_.end_term && nxt == g_.end_state) {
            st.stack = ref;
            st.depth = depth;
            st.levels = lv;
            return true;
        }
    }
}

bool Parser::guard(int32_t& lv, int32_t code) const {
    const Node& f = node(lv, false);
    if (f.parent == NONE) return false;  // no object is open (the bottom frame)
    const uint32_t seen = uint32_t(f.value);
    if (code > 0) {  // a required name's member: the innermost object has seen it
        const uint32_t now = seen | (1u << (code - 1));
        if (now != seen) lv = push(f.parent, int32_t(now), false);
        return true;
    }
    const int32_t j = -code - 1;  // a close check: every name of one of its masks seen
    for (int32_t k = g_.p_guard_off[j]; k < g_.p_guard_off[j + 1]; ++k) {
        const uint32_t need = uint32_t(g_.p_guard_mask[k]);
        if ((seen & need) == need) return true;
    }
    return false;
}

bool Parser::step(PState& st, int32_t term, int32_t indent) const {
    if (!g_.has_indenter) return feed(st, term);
    PState s = st;
    if (term == g_.nl_term) {
        if (s.parens > 0) return true;  // NEWLINE inside brackets is dropped
        int32_t top = node(s.levels, false).value;
        if (!feed(s, term)) return false;
        if (indent > top) {
            if (!feed(s, g_.indent_term)) return false;
            s.levels = push(s.levels, indent, false);
        } else {
            while (indent < top) {
                s.levels = node(s.levels, false).parent;
                top = node(s.levels, false).value;
                if (!feed(s, g_.dedent_term)) return false;
            }
            if (indent != top) return false;
        }
    } else if (term == g_.end_term) {
        int32_t lv = s.levels;
        while (node(lv, false).parent != NONE) {
            if (!feed(s, g_.dedent_term)) return false;
            lv = node(lv, false).parent;
        }
        if (!feed(s, term)) return false;
        s.levels = lv;
    } else if (term >= 0 && g_.p_open[term]) {
        if (!feed(s, term)) return false;
        s.parens += 1;
    } else if (term >= 0 && g_.p_close[term]) {
        if (s.parens == 0 || !feed(s, term)) return false;
        s.parens -= 1;
    } else if (!feed(s, term)) {
        return false;
    }
    st = s;
    return true;
}

bool Parser::step_elem(PState& st, int32_t elem) const {
    if (elem >= INDENT_BASE) return step(st, g_.nl_term, (elem - INDENT_BASE) >> 1);
    return step(st, g_.label_term[elem], 0);
}

bool Parser::accepts_newline_after(const PState& st) const {
    if (!g_.has_indenter || !st.ok()) return false;
    if (st.parens > 0) return true;
    int32_t top = node(st.levels, false).value;
    std::vector<int32_t> cands{top + 1};
    for (int32_t lv = st.levels; lv != NONE; lv = node(lv, false).parent) cands.push_back(node(lv, false).value);
    std::sort(cands.begin(), cands.end());
    cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
    for (int32_t k : cands) {
        PState s = st;
        if (step(s, g_.nl_term, k)) return true;
    }
    return false;
}

bool Parser::accepts_end(const PState& st) const {
    PState s = st;
    return step(s, g_.end_term, 0);
}

static int32_t copy_chain(int32_t ref, std::vector<Node>& dst, const std::vector<Node>& src) {
    if (ref >= 0 || ref == NONE) return ref;
    std::vector<int32_t> chain;
    while (ref < 0 && ref != NONE) {
        chain.push_back(ref);
        ref = src[-ref - 1].parent;
    }
    int32_t parent = ref;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        dst.push_back({src[-*it - 1].value, parent});
        parent = int32_t(dst.size()) - 1;
    }
    return parent;
}

PState materialize(const PState& st, Pools& committed, const Pools& scratch) {
    PState out = st;
    out.stack = copy_chain(st.stack, committed.stack, scratch.stack);
    out.levels = copy_chain(st.levels, committed.levels, scratch.levels);
    return out;
}

}  // namespace cad
