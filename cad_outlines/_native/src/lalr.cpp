#include "lalr.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "flat_map.h"

namespace cad {

namespace {

// Terminal sets: one row of 64-bit words per node.
struct BitRows {
    size_t w;
    std::vector<uint64_t> bits;
    BitRows(size_t rows, size_t nbits) : w((nbits + 63) / 64), bits(rows * w, 0) {}
    uint64_t* row(size_t i) { return bits.data() + i * w; }
    const uint64_t* row(size_t i) const { return bits.data() + i * w; }
    void set(size_t i, size_t b) { row(i)[b >> 6] |= uint64_t(1) << (b & 63); }
    void unite(size_t dst, size_t src) {
        uint64_t *d = row(dst), *s = row(src);
        for (size_t k = 0; k < w; ++k) d[k] |= s[k];
    }
};

// lark's digraph (DeRemer & Pennello, iterative): F(x) = G(x) ∪ ⋃{F(y) | x R y}, R as CSR
// (off, adj). Node x's set is row h[x] of `rows`: h holds G on entry and F on exit. As in
// lark (whose F[x] starts as the very set object G[x] and whose strongly connected
// components end up sharing one object), x's unions go into row h[x] itself and a
// component's nodes end up pointing at its root's row: nodes that share a row in G share
// what is added to it. That matters only after a cycle in `reads` (a grammar that is not
// LR(k)), where lark's own answer can depend on its set iteration order.
void digraph(int32_t n, const std::vector<int32_t>& off, const std::vector<int32_t>& adj, BitRows& rows,
             std::vector<int32_t>& h) {
    std::vector<int32_t> N(size_t(n), 0), S;
    struct Frame {
        int32_t x, e, d;
    };
    std::vector<Frame> frames;
    auto visit = [&](int32_t x) {
        S.push_back(x);
        N[x] = int32_t(S.size());
        frames.push_back({x, off[x], N[x]});
    };
    for (int32_t x0 = 0; x0 < n; ++x0) {
        if (N[x0] != 0) continue;
        visit(x0);
        while (!frames.empty()) {
            Frame& f = frames.back();
            const int32_t x = f.x;
            if (f.e < off[x + 1]) {
                const int32_t y = adj[f.e];
                if (N[y] == 0) {
                    visit(y);  // this edge is taken up again once y is done
                    continue;
                }
                if (N[y] > 0 && N[y] < N[x]) N[x] = N[y];
                if (h[x] != h[y]) rows.unite(h[x], h[y]);
                ++f.e;
                continue;
            }
            if (N[x] == f.d) {  // x roots a strongly connected component: all of it gets F(x)
                while (true) {
                    const int32_t z = S.back();
                    S.pop_back();
                    N[z] = -1;
                    h[z] = h[x];
                    if (z == x) break;
                }
            }
            frames.pop_back();
        }
    }
}

// CSR of (key, value) pairs with keys in [0, n), values in pair order per key.
void to_csr(int32_t n, const std::vector<std::pair<int32_t, int32_t>>& pairs, std::vector<int32_t>& off,
            std::vector<int32_t>& adj) {
    off.assign(size_t(n) + 1, 0);
    for (auto& [k, v] : pairs) ++off[k + 1];
    for (int32_t i = 0; i < n; ++i) off[i + 1] += off[i];
    adj.assign(pairs.size(), 0);
    std::vector<int32_t> pos(off.begin(), off.end() - 1);
    for (auto& [k, v] : pairs) adj[pos[k]++] = v;
}

uint64_t hash_items(const int32_t* p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (size_t i = 0; i < n; ++i) {
        h ^= uint64_t(uint32_t(p[i])) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    return h;
}

void check_input(const LalrGrammar& g) {
    auto bad = [](const std::string& why) { throw std::invalid_argument("build_lalr: " + why); };
    if (g.n_symbols <= 0 || g.n_rules < 0) bad("no symbols");
    if (g.start < 0 || g.start >= g.n_symbols || g.is_term[g.start]) bad("the start symbol is not a nonterminal");
    if (g.rhs_off[0] != 0) bad("rhs offsets must start at 0");
    for (int32_t r = 0; r < g.n_rules; ++r) {
        if (g.origin[r] < 0 || g.origin[r] >= g.n_symbols || g.is_term[g.origin[r]])
            bad("rule " + std::to_string(r) + "'s origin is not a nonterminal");
        if (g.rhs_off[r + 1] < g.rhs_off[r]) bad("rhs offsets must not decrease");
        for (int32_t i = g.rhs_off[r]; i < g.rhs_off[r + 1]; ++i)
            if (g.rhs[i] < 0 || g.rhs[i] >= g.n_symbols) bad("rule " + std::to_string(r) + " uses an unknown symbol");
    }
}

// The augmented grammar: rule nR is `$root -> start`; symbol END (= n_symbols) is $END, ROOT is $root.
struct Augmented {
    int32_t nR = 0, END = 0, ROOT = 0, nS = 0, nRules = 0, start = 0;
    std::vector<int32_t> org, off, rhs;
    std::vector<uint8_t> term;                // per symbol, $END and $root included
    std::vector<int32_t> by_org_off, by_org;  // the rules of each nonterminal, CSR
    int32_t len(int32_t r) const { return off[r + 1] - off[r]; }
    bool has_rules(int32_t A) const { return by_org_off[A + 1] > by_org_off[A]; }
};

Augmented augment(const LalrGrammar& g) {
    Augmented a;
    a.nR = g.n_rules, a.END = g.n_symbols, a.ROOT = g.n_symbols + 1, a.nS = g.n_symbols + 2, a.start = g.start;
    a.org.assign(g.origin, g.origin + a.nR);
    a.off.assign(g.rhs_off, g.rhs_off + a.nR + 1);
    a.rhs.assign(g.rhs, g.rhs + g.rhs_off[a.nR]);
    a.org.push_back(a.ROOT);
    a.rhs.push_back(g.start);
    a.off.push_back(int32_t(a.rhs.size()));
    a.term.assign(g.is_term, g.is_term + g.n_symbols);
    a.term.push_back(1);  // $END
    a.term.push_back(0);  // $root
    a.nRules = a.nR + 1;
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (int32_t r = 0; r < a.nRules; ++r) pairs.push_back({a.org[r], r});
    to_csr(a.nS, pairs, a.by_org_off, a.by_org);
    return a;
}

// lark's GrammarAnalyzer errors: rules given twice (pairs (first, later) in out.duplicates) and
// nonterminals used without rules (pairs (rule or -1 for the start, nonterminal) in out.undefined).
void find_grammar_errors(const Augmented& a, LalrTables& out) {
    std::vector<int32_t> order(static_cast<size_t>(a.nR));
    for (int32_t r = 0; r < a.nR; ++r) order[r] = r;
    auto key_less = [&](int32_t x, int32_t y) {
        if (a.org[x] != a.org[y]) return a.org[x] < a.org[y];
        if (a.len(x) != a.len(y)) return a.len(x) < a.len(y);
        return std::lexicographical_compare(a.rhs.begin() + a.off[x], a.rhs.begin() + a.off[x + 1],
                                            a.rhs.begin() + a.off[y], a.rhs.begin() + a.off[y + 1]);
    };
    std::stable_sort(order.begin(), order.end(), key_less);
    std::vector<std::pair<int32_t, int32_t>> dup;  // (rule, the first rule equal to it)
    for (size_t i = 1, first = 0; i < order.size(); ++i) {
        if (key_less(order[i - 1], order[i])) first = i;
        else dup.push_back({order[i], order[first]});
    }
    std::sort(dup.begin(), dup.end());
    for (auto& [r, first] : dup) out.duplicates.insert(out.duplicates.end(), {first, r});
    for (int32_t r = 0; r < a.nRules; ++r)
        for (int32_t i = a.off[r]; i < a.off[r + 1]; ++i)
            if (!a.term[a.rhs[i]] && !a.has_rules(a.rhs[i]))
                out.undefined.insert(out.undefined.end(), {r == a.nR ? -1 : r, a.rhs[i]});
}

// NULLABLE per symbol (over the grammar's rules; $root is never nullable, as lark's `$root -> start $END`).
std::vector<uint8_t> nullable_symbols(const Augmented& a) {
    std::vector<uint8_t> nullable(size_t(a.nS), 0);
    std::vector<int32_t> remaining(static_cast<size_t>(a.nR)), work;
    std::vector<std::pair<int32_t, int32_t>> uses;  // (nonterminal, rule using it), per occurrence
    for (int32_t r = 0; r < a.nR; ++r) {
        remaining[r] = a.len(r);
        for (int32_t i = a.off[r]; i < a.off[r + 1]; ++i)
            if (!a.term[a.rhs[i]]) uses.push_back({a.rhs[i], r});
    }
    std::vector<int32_t> use_off, use_rule;
    to_csr(a.nS, uses, use_off, use_rule);
    auto found = [&](int32_t A) {
        if (!nullable[A]) nullable[A] = 1, work.push_back(A);
    };
    for (int32_t r = 0; r < a.nR; ++r)
        if (remaining[r] == 0) found(a.org[r]);
    while (!work.empty()) {
        const int32_t A = work.back();
        work.pop_back();
        for (int32_t u = use_off[A]; u < use_off[A + 1]; ++u)
            if (--remaining[use_rule[u]] == 0) found(a.org[use_rule[u]]);
    }
    return nullable;
}

// LR(0) items: rule r at dot d is base[r] + d.
struct Items {
    std::vector<int32_t> base, rule, next;  // next: the symbol after the dot, -1 at the end
    std::vector<uint8_t> nullable;          // per symbol
    std::vector<uint8_t> rest_nullable;     // per item: every symbol from the dot on is nullable
};

Items number_items(const Augmented& a) {
    Items it;
    it.base.resize(size_t(a.nRules) + 1);
    for (int32_t r = 0; r <= a.nRules; ++r) it.base[r] = a.off[r] + r;
    const int32_t n_items = it.base[a.nRules];
    it.rule.resize(static_cast<size_t>(n_items));
    it.next.resize(static_cast<size_t>(n_items));
    for (int32_t r = 0; r < a.nRules; ++r)
        for (int32_t d = 0; d <= a.len(r); ++d) {
            it.rule[it.base[r] + d] = r;
            it.next[it.base[r] + d] = d < a.len(r) ? a.rhs[a.off[r] + d] : -1;
        }
    it.nullable = nullable_symbols(a);
    it.rest_nullable.assign(size_t(n_items), 1);
    for (int32_t r = 0; r < a.nRules; ++r)
        for (int32_t d = a.len(r) - 1; d >= 0; --d) {
            const int32_t x = a.rhs[a.off[r] + d];
            it.rest_nullable[it.base[r] + d] = it.rest_nullable[it.base[r] + d + 1] && !a.term[x] && it.nullable[x];
        }
    return it;
}

// The LR(0) automaton: states by kernel, transitions per state sorted by symbol.
struct Lr0 {
    std::vector<int32_t> k_off{0}, k_items;                  // kernels per state, sorted
    std::vector<int32_t> trans_off{0}, trans_sym, trans_to;  // per state, CSR sorted by symbol
    int32_t n_states() const { return int32_t(k_off.size()) - 1; }
    int32_t trans_index(int32_t s, int32_t x) const {  // the transition of s on x, -1 if none
        auto b = trans_sym.begin() + trans_off[s], e = trans_sym.begin() + trans_off[s + 1];
        auto it = std::lower_bound(b, e, x);
        return it != e && *it == x ? int32_t(it - trans_sym.begin()) : -1;
    }
    int32_t entry_of(int32_t s, int32_t item) const {  // item's entry (index into k_items) in s's kernel
        auto b = k_items.begin() + k_off[s], e = k_items.begin() + k_off[s + 1];
        return int32_t(std::lower_bound(b, e, item) - k_items.begin());
    }
};

// The nonterminals a closure adds for a nonterminal: its rules' first symbols, CSR.
void closure_leads(const Augmented& a, std::vector<int32_t>& lead_off, std::vector<int32_t>& lead) {
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (int32_t r = 0; r < a.nRules; ++r)
        if (a.len(r) > 0 && !a.term[a.rhs[a.off[r]]]) pairs.push_back({a.org[r], a.rhs[a.off[r]]});
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    to_csr(a.nS, pairs, lead_off, lead);
}

// LR(0) item sets, breadth-first from the start state (`$root -> . start`), transitions in symbol order.
Lr0 build_lr0(const Augmented& a, const Items& it) {
    Lr0 m;
    std::vector<int32_t> lead_off, lead;
    closure_leads(a, lead_off, lead);
    InternIndex states;  // the states, by kernel hash
    auto find_or_add = [&](const std::vector<int32_t>& kernel) {
        auto [s, fresh] = states.find_or_add(hash_items(kernel.data(), kernel.size()), [&](int32_t v) {
            return size_t(m.k_off[v + 1] - m.k_off[v]) == kernel.size() &&
                   std::equal(kernel.begin(), kernel.end(), m.k_items.begin() + m.k_off[v]);
        });
        if (fresh) {
            m.k_items.insert(m.k_items.end(), kernel.begin(), kernel.end());
            m.k_off.push_back(int32_t(m.k_items.size()));
        }
        return s;
    };
    find_or_add({it.base[a.nR]});
    std::vector<int32_t> mark(size_t(a.nS), -1), nts, touched;
    std::vector<std::vector<int32_t>> bucket(static_cast<size_t>(a.nS));
    auto add_next = [&](int32_t item) {
        const int32_t x = it.next[item];
        if (x < 0) return;
        if (bucket[x].empty()) touched.push_back(x);
        bucket[x].push_back(item + 1);
    };
    for (int32_t s = 0; s < int32_t(states.size()); ++s) {
        nts.clear();
        touched.clear();
        for (int32_t k = m.k_off[s]; k < m.k_off[s + 1]; ++k) {
            const int32_t x = it.next[m.k_items[k]];
            if (x >= 0 && !a.term[x] && mark[x] != s) mark[x] = s, nts.push_back(x);
        }
        for (size_t i = 0; i < nts.size(); ++i)
            for (int32_t e = lead_off[nts[i]]; e < lead_off[nts[i] + 1]; ++e)
                if (mark[lead[e]] != s) mark[lead[e]] = s, nts.push_back(lead[e]);
        for (int32_t k = m.k_off[s]; k < m.k_off[s + 1]; ++k) add_next(m.k_items[k]);
        for (int32_t A : nts)
            for (int32_t e = a.by_org_off[A]; e < a.by_org_off[A + 1]; ++e) add_next(it.base[a.by_org[e]]);
        std::sort(touched.begin(), touched.end());
        for (int32_t x : touched) {
            std::sort(bucket[x].begin(), bucket[x].end());
            const int32_t t = find_or_add(bucket[x]);
            bucket[x].clear();
            m.trans_sym.push_back(x);
            m.trans_to.push_back(t);
        }
        m.trans_off.push_back(int32_t(m.trans_sym.size()));
    }
    return m;
}

// Nonterminal transitions, numbered in transition order.
struct NtTransitions {
    std::vector<int32_t> of;            // per transition: its number, -1 for a terminal's
    std::vector<int32_t> state, trans;  // per number: the state it leaves, the transition
    int32_t size() const { return int32_t(state.size()); }
};

NtTransitions nonterminal_transitions(const Augmented& a, const Lr0& m) {
    NtTransitions nt;
    nt.of.assign(m.trans_sym.size(), -1);
    for (int32_t s = 0; s < m.n_states(); ++s)
        for (int32_t k = m.trans_off[s]; k < m.trans_off[s + 1]; ++k)
            if (!a.term[m.trans_sym[k]]) {
                nt.of[k] = nt.size();
                nt.state.push_back(s);
                nt.trans.push_back(k);
            }
    return nt;
}

// Terminal bits: terminals in symbol order, $END last.
struct TermBits {
    std::vector<int32_t> bit_of, term_of_bit;
    size_t size() const { return term_of_bit.size(); }
};

TermBits terminal_bits(const Augmented& a) {
    TermBits t;
    t.bit_of.assign(size_t(a.nS), -1);
    for (int32_t x = 0; x <= a.END; ++x)
        if (a.term[x]) t.bit_of[x] = int32_t(t.term_of_bit.size()), t.term_of_bit.push_back(x);
    return t;
}

// Directly-reads into F's rows (one per nonterminal transition), and the reads relation (CSR).
void direct_reads(const Augmented& a, const Items& it, const Lr0& m, const NtTransitions& nt, const TermBits& bits,
                  BitRows& F, std::vector<int32_t>& reads_off, std::vector<int32_t>& reads) {
    reads_off.assign(1, 0);
    reads.clear();
    for (int32_t n = 0; n < nt.size(); ++n) {
        const int32_t r = m.trans_to[nt.trans[n]];
        if (nt.state[n] == 0 && m.trans_sym[nt.trans[n]] == a.start) F.set(n, bits.bit_of[a.END]);
        for (int32_t k = m.trans_off[r]; k < m.trans_off[r + 1]; ++k) {
            const int32_t x = m.trans_sym[k];
            if (a.term[x]) F.set(n, bits.bit_of[x]);
            else if (it.nullable[x]) reads.push_back(nt.of[k]);
        }
        reads_off.push_back(int32_t(reads.size()));
    }
}

// A walk from a kernel entry (an index into k_items) to the end of its rule, memoised per entry: the state it
// ends in, and the nonterminal transitions on it that only nullable symbols follow (the includes it
// contributes; a linked list through inc_list).
struct Walks {
    std::vector<int32_t> end, inc_head;                 // per entry
    std::vector<std::pair<int32_t, int32_t>> inc_list;  // (nonterminal transition, next in list)
};

Walks walk_kernel_entries(const Augmented& a, const Items& it, const Lr0& m, const NtTransitions& nt) {
    const int32_t n_entries = int32_t(m.k_items.size());
    std::vector<int32_t> entry_state(static_cast<size_t>(n_entries));
    for (int32_t s = 0; s < m.n_states(); ++s)
        std::fill(entry_state.begin() + m.k_off[s], entry_state.begin() + m.k_off[s + 1], s);
    Walks w;
    w.end.assign(size_t(n_entries), -1);
    w.inc_head.assign(size_t(n_entries), -1);
    std::vector<std::array<int32_t, 3>> chain;  // (entry, its transition, the next entry)
    for (int32_t e0 = 0; e0 < n_entries; ++e0) {
        chain.clear();
        for (int32_t e = e0; w.end[e] < 0;) {
            const int32_t item = m.k_items[e];
            if (it.next[item] < 0) {
                w.end[e] = entry_state[e];
                break;
            }
            const int32_t k = m.trans_index(entry_state[e], it.next[item]);
            const int32_t nxt = m.entry_of(m.trans_to[k], item + 1);
            chain.push_back({e, k, nxt});
            e = nxt;
        }
        for (auto c = chain.rbegin(); c != chain.rend(); ++c) {
            const auto [e, k, nxt] = *c;
            w.end[e] = w.end[nxt];
            w.inc_head[e] = w.inc_head[nxt];
            if (!a.term[m.trans_sym[k]] && it.rest_nullable[m.k_items[e] + 1]) {
                w.inc_list.push_back({nt.of[k], w.inc_head[e]});
                w.inc_head[e] = int32_t(w.inc_list.size()) - 1;
            }
        }
    }
    return w;
}

// The includes relation and the lookbacks: for each nonterminal transition (p, A), the rules of A walked from
// p (and, as lark does, p's kernel items of A).
struct Lookbacks {
    std::vector<std::pair<int32_t, int32_t>> includes;  // (transition, transition it includes)
    std::vector<std::pair<int32_t, int32_t>> lookback;  // (state, lookback id): rule[id] reduced for nt[id]
    std::vector<int32_t> rule, nt;
};

Lookbacks includes_and_lookbacks(const Augmented& a, const Items& it, const Lr0& m, const NtTransitions& nt,
                                 const Walks& w) {
    Lookbacks lb;
    for (int32_t n = 0; n < nt.size(); ++n) {
        const int32_t p = nt.state[n], A = m.trans_sym[nt.trans[n]];
        auto includes_from = [&](int32_t e) {
            for (int32_t l = w.inc_head[e]; l >= 0; l = w.inc_list[l].second)
                lb.includes.push_back({w.inc_list[l].first, n});
        };
        for (int32_t i = a.by_org_off[A]; i < a.by_org_off[A + 1]; ++i) {
            const int32_t r = a.by_org[i];
            int32_t end = p;
            if (a.len(r) > 0) {  // the first step from p, the rest from the entry it reaches
                const int32_t x = a.rhs[a.off[r]], k = m.trans_index(p, x);
                if (!a.term[x] && it.rest_nullable[it.base[r] + 1]) lb.includes.push_back({nt.of[k], n});
                const int32_t e = m.entry_of(m.trans_to[k], it.base[r] + 1);
                includes_from(e);
                end = w.end[e];
            }
            lb.lookback.push_back({end, int32_t(lb.rule.size())});
            lb.rule.push_back(r);
            lb.nt.push_back(n);
        }
        for (int32_t e = m.k_off[p]; e < m.k_off[p + 1]; ++e)
            if (a.org[it.rule[m.k_items[e]]] == A) includes_from(e);
    }
    return lb;
}

// Read = digraph(reads, DR); Follow = digraph(includes, Read). F holds DR on entry; returns each nonterminal
// transition's row of F holding its Follow set.
std::vector<int32_t> follow_sets(int32_t n_nt, const std::vector<int32_t>& reads_off, const std::vector<int32_t>& reads,
                                 const std::vector<std::pair<int32_t, int32_t>>& includes, BitRows& F) {
    std::vector<int32_t> h(static_cast<size_t>(n_nt));
    for (int32_t n = 0; n < n_nt; ++n) h[n] = n;
    digraph(n_nt, reads_off, reads, F, h);
    std::vector<int32_t> inc_off, inc_adj;
    to_csr(n_nt, includes, inc_off, inc_adj);
    digraph(n_nt, inc_off, inc_adj, F, h);
    return h;
}

// One state's reductions from its candidates (terminal bit, rule), sorted by bit: reduce/reduce collisions go
// to a unique highest priority (else into out.collision_*), shift/reduce to the shift.
void resolve_state(const LalrGrammar& g, const Lr0& m, const TermBits& bits, int32_t s,
                   const std::vector<std::pair<int32_t, int32_t>>& cands, LalrTables& out) {
    for (size_t i = 0; i < cands.size();) {
        size_t j = i;
        while (j < cands.size() && cands[j].first == cands[i].first) ++j;
        const int32_t t = bits.term_of_bit[cands[i].first];
        int32_t chosen = cands[i].second;
        if (j - i > 1) {  // reduce/reduce: a unique highest priority wins
            int32_t best = INT32_MIN, n_best = 0;
            for (size_t c = i; c < j; ++c) {
                const int32_t pr = g.priority[cands[c].second];
                if (pr > best) best = pr, n_best = 0, chosen = cands[c].second;
                n_best += pr == best;
            }
            if (n_best > 1) {
                out.collision_state.push_back(s);
                out.collision_term.push_back(t);
                for (size_t c = i; c < j; ++c) out.collision_rules.push_back(cands[c].second);
                out.collision_off.push_back(int32_t(out.collision_rules.size()));
                i = j;
                continue;
            }
        }
        if (m.trans_index(s, t) >= 0) {
            ++out.shift_reduce;  // shift/reduce: shift
        } else {
            out.reduce_term.push_back(t);
            out.reduce_rule.push_back(chosen);
        }
        i = j;
    }
}

// The reductions: lookaheads per (state, rule) are the union of the Follow sets of its lookbacks; then the
// actions, terminal by terminal (resolve_state).
void reduce_actions(const LalrGrammar& g, const Augmented& a, const Lr0& m, const TermBits& bits,
                    const Lookbacks& lbs, const BitRows& F, const std::vector<int32_t>& h, LalrTables& out) {
    std::vector<int32_t> lb_off, lb;
    to_csr(m.n_states(), lbs.lookback, lb_off, lb);
    std::vector<int32_t> slot_of(static_cast<size_t>(a.nRules), -1), slot_rule;
    BitRows la(0, bits.size());
    std::vector<uint64_t> any(la.w);
    std::vector<std::pair<int32_t, int32_t>> cands;  // (terminal bit, rule) in one state
    out.reduce_off.push_back(0);
    for (int32_t s = 0; s < m.n_states(); ++s) {
        slot_rule.clear();
        for (int32_t e = lb_off[s]; e < lb_off[s + 1]; ++e) {
            const int32_t r = lbs.rule[lb[e]];
            if (slot_of[r] < 0) slot_of[r] = int32_t(slot_rule.size()), slot_rule.push_back(r);
        }
        std::sort(slot_rule.begin(), slot_rule.end());
        for (size_t i = 0; i < slot_rule.size(); ++i) slot_of[slot_rule[i]] = int32_t(i);
        la.bits.assign(slot_rule.size() * la.w, 0);
        for (int32_t e = lb_off[s]; e < lb_off[s + 1]; ++e) {
            const uint64_t* f = F.row(h[lbs.nt[lb[e]]]);
            uint64_t* d = la.row(slot_of[lbs.rule[lb[e]]]);
            for (size_t w = 0; w < la.w; ++w) d[w] |= f[w];
        }
        std::fill(any.begin(), any.end(), 0);
        for (size_t i = 0; i < slot_rule.size(); ++i)
            for (size_t w = 0; w < la.w; ++w) any[w] |= la.row(i)[w];
        cands.clear();
        for (size_t w = 0; w < la.w; ++w)
            for (uint64_t word = any[w]; word; word &= word - 1) {
                const int32_t b = int32_t(w * 64 + __builtin_ctzll(word));
                for (size_t i = 0; i < slot_rule.size(); ++i)
                    if (la.row(i)[w] >> (b & 63) & 1) cands.push_back({b, slot_rule[i]});
            }
        for (int32_t r : slot_rule) slot_of[r] = -1;
        resolve_state(g, m, bits, s, cands, out);
        out.reduce_off.push_back(int32_t(out.reduce_term.size()));
    }
}

// The transitions as the tables' shifts (terminals) and gotos (nonterminals).
void shifts_and_gotos(const Augmented& a, const Lr0& m, LalrTables& out) {
    out.shift_off.push_back(0);
    out.goto_off.push_back(0);
    for (int32_t s = 0; s < m.n_states(); ++s) {
        for (int32_t k = m.trans_off[s]; k < m.trans_off[s + 1]; ++k) {
            const bool shift = a.term[m.trans_sym[k]];
            (shift ? out.shift_term : out.goto_sym).push_back(m.trans_sym[k]);
            (shift ? out.shift_to : out.goto_to).push_back(m.trans_to[k]);
        }
        out.shift_off.push_back(int32_t(out.shift_term.size()));
        out.goto_off.push_back(int32_t(out.goto_sym.size()));
    }
}

}  // namespace

LalrTables build_lalr(const LalrGrammar& g) {
    check_input(g);
    LalrTables out;
    const Augmented a = augment(g);
    out.end_term = a.END;
    find_grammar_errors(a, out);
    if (!out.duplicates.empty() || !out.undefined.empty()) return out;

    const Items items = number_items(a);
    const Lr0 m = build_lr0(a, items);
    out.n_states = m.n_states();
    out.start_state = 0;
    out.end_state = m.trans_to[m.trans_index(0, g.start)];

    // LALR(1) lookaheads, DeRemer & Pennello
    const NtTransitions nt = nonterminal_transitions(a, m);
    const TermBits bits = terminal_bits(a);
    BitRows F(size_t(nt.size()), bits.size());
    std::vector<int32_t> reads_off, reads;
    direct_reads(a, items, m, nt, bits, F, reads_off, reads);
    const Lookbacks lbs = includes_and_lookbacks(a, items, m, nt, walk_kernel_entries(a, items, m, nt));
    const std::vector<int32_t> h = follow_sets(nt.size(), reads_off, reads, lbs.includes, F);

    reduce_actions(g, a, m, bits, lbs, F, h, out);
    shifts_and_gotos(a, m, out);
    return out;
}

}  // namespace cad
