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

}  // namespace

LalrTables build_lalr(const LalrGrammar& g) {
    check_input(g);
    LalrTables out;
    const int32_t nR = g.n_rules, END = g.n_symbols, ROOT = g.n_symbols + 1, nS = g.n_symbols + 2;
    out.end_term = END;

    // the augmented grammar: rule nR is `$root -> start`
    std::vector<int32_t> org(g.origin, g.origin + nR), off(g.rhs_off, g.rhs_off + nR + 1);
    std::vector<int32_t> rhs(g.rhs, g.rhs + g.rhs_off[nR]);
    org.push_back(ROOT);
    rhs.push_back(g.start);
    off.push_back(int32_t(rhs.size()));
    std::vector<uint8_t> term(g.is_term, g.is_term + g.n_symbols);
    term.push_back(1);  // $END
    term.push_back(0);  // $root
    const int32_t nRules = nR + 1;
    auto len = [&](int32_t r) { return off[r + 1] - off[r]; };

    // grammar errors (lark's GrammarAnalyzer): rules given twice, nonterminals without rules
    {
        std::vector<int32_t> order(static_cast<size_t>(nR));
        for (int32_t r = 0; r < nR; ++r) order[r] = r;
        auto key_less = [&](int32_t a, int32_t b) {
            if (org[a] != org[b]) return org[a] < org[b];
            if (len(a) != len(b)) return len(a) < len(b);
            return std::lexicographical_compare(rhs.begin() + off[a], rhs.begin() + off[a + 1], rhs.begin() + off[b],
                                                rhs.begin() + off[b + 1]);
        };
        std::stable_sort(order.begin(), order.end(), key_less);
        std::vector<std::pair<int32_t, int32_t>> dup;  // (rule, the first rule equal to it)
        for (size_t i = 1, first = 0; i < order.size(); ++i) {
            if (key_less(order[i - 1], order[i])) first = i;
            else dup.push_back({order[i], order[first]});
        }
        std::sort(dup.begin(), dup.end());
        for (auto& [r, first] : dup) out.duplicates.insert(out.duplicates.end(), {first, r});
    }
    std::vector<int32_t> by_org_off(size_t(nS) + 1, 0), by_org(static_cast<size_t>(nRules));
    {
        std::vector<std::pair<int32_t, int32_t>> pairs;
        for (int32_t r = 0; r < nRules; ++r) pairs.push_back({org[r], r});
        to_csr(nS, pairs, by_org_off, by_org);
    }
    auto has_rules = [&](int32_t A) { return by_org_off[A + 1] > by_org_off[A]; };
    for (int32_t r = 0; r < nRules; ++r)
        for (int32_t i = off[r]; i < off[r + 1]; ++i)
            if (!term[rhs[i]] && !has_rules(rhs[i]))
                out.undefined.insert(out.undefined.end(), {r == nR ? -1 : r, rhs[i]});
    if (!out.duplicates.empty() || !out.undefined.empty()) return out;

    // items: rule r at dot d is ibase[r] + d
    std::vector<int32_t> ibase(size_t(nRules) + 1);
    for (int32_t r = 0; r <= nRules; ++r) ibase[r] = off[r] + r;
    const int32_t n_items = ibase[nRules];
    std::vector<int32_t> item_rule(static_cast<size_t>(n_items)), item_next(static_cast<size_t>(n_items));
    for (int32_t r = 0; r < nRules; ++r)
        for (int32_t d = 0; d <= len(r); ++d) {
            item_rule[ibase[r] + d] = r;
            item_next[ibase[r] + d] = d < len(r) ? rhs[off[r] + d] : -1;
        }

    // NULLABLE (over the grammar's rules; $root is never nullable, as lark's `$root -> start $END`)
    std::vector<uint8_t> nullable(size_t(nS), 0);
    {
        std::vector<int32_t> remaining(static_cast<size_t>(nR)), work;
        std::vector<std::pair<int32_t, int32_t>> uses;  // (nonterminal, rule using it), per occurrence
        for (int32_t r = 0; r < nR; ++r) {
            remaining[r] = len(r);
            for (int32_t i = off[r]; i < off[r + 1]; ++i)
                if (!term[rhs[i]]) uses.push_back({rhs[i], r});
        }
        std::vector<int32_t> use_off, use_rule;
        to_csr(nS, uses, use_off, use_rule);
        auto found = [&](int32_t A) {
            if (!nullable[A]) nullable[A] = 1, work.push_back(A);
        };
        for (int32_t r = 0; r < nR; ++r)
            if (remaining[r] == 0) found(org[r]);
        while (!work.empty()) {
            const int32_t A = work.back();
            work.pop_back();
            for (int32_t u = use_off[A]; u < use_off[A + 1]; ++u)
                if (--remaining[use_rule[u]] == 0) found(org[use_rule[u]]);
        }
    }
    std::vector<uint8_t> rest_nullable(size_t(n_items), 1);  // every symbol from the dot on is nullable
    for (int32_t r = 0; r < nRules; ++r)
        for (int32_t d = len(r) - 1; d >= 0; --d)
            rest_nullable[ibase[r] + d] =
                rest_nullable[ibase[r] + d + 1] && !term[rhs[off[r] + d]] && nullable[rhs[off[r] + d]];

    // the nonterminals a closure adds for a nonterminal: its rules' first symbols
    std::vector<int32_t> lead_off(size_t(nS) + 1, 0), lead;
    {
        std::vector<std::pair<int32_t, int32_t>> pairs;
        for (int32_t r = 0; r < nRules; ++r)
            if (len(r) > 0 && !term[rhs[off[r]]]) pairs.push_back({org[r], rhs[off[r]]});
        std::sort(pairs.begin(), pairs.end());
        pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
        to_csr(nS, pairs, lead_off, lead);
    }

    // LR(0) item sets, breadth-first from the start state, transitions in symbol order
    std::vector<int32_t> k_off{0}, k_items;           // kernels per state, sorted
    InternIndex states;                               // the states, by kernel hash
    auto find_or_add = [&](const std::vector<int32_t>& kernel) {
        auto [s, fresh] = states.find_or_add(hash_items(kernel.data(), kernel.size()), [&](int32_t v) {
            return size_t(k_off[v + 1] - k_off[v]) == kernel.size() &&
                   std::equal(kernel.begin(), kernel.end(), k_items.begin() + k_off[v]);
        });
        if (fresh) {
            k_items.insert(k_items.end(), kernel.begin(), kernel.end());
            k_off.push_back(int32_t(k_items.size()));
        }
        return s;
    };
    find_or_add({ibase[nR]});
    std::vector<int32_t> trans_off{0}, trans_sym, trans_to;  // per state, CSR sorted by symbol
    {
        std::vector<int32_t> mark(size_t(nS), -1), nts, touched;
        std::vector<std::vector<int32_t>> bucket(static_cast<size_t>(nS));
        auto add_next = [&](int32_t item) {
            const int32_t x = item_next[item];
            if (x < 0) return;
            if (bucket[x].empty()) touched.push_back(x);
            bucket[x].push_back(item + 1);
        };
        for (int32_t s = 0; s < int32_t(states.size()); ++s) {
            nts.clear();
            touched.clear();
            for (int32_t k = k_off[s]; k < k_off[s + 1]; ++k) {
                const int32_t x = item_next[k_items[k]];
                if (x >= 0 && !term[x] && mark[x] != s) mark[x] = s, nts.push_back(x);
            }
            for (size_t i = 0; i < nts.size(); ++i)
                for (int32_t e = lead_off[nts[i]]; e < lead_off[nts[i] + 1]; ++e)
                    if (mark[lead[e]] != s) mark[lead[e]] = s, nts.push_back(lead[e]);
            for (int32_t k = k_off[s]; k < k_off[s + 1]; ++k) add_next(k_items[k]);
            for (int32_t A : nts)
                for (int32_t e = by_org_off[A]; e < by_org_off[A + 1]; ++e) add_next(ibase[by_org[e]]);
            std::sort(touched.begin(), touched.end());
            for (int32_t x : touched) {
                std::sort(bucket[x].begin(), bucket[x].end());
                const int32_t t = find_or_add(bucket[x]);
                bucket[x].clear();
                trans_sym.push_back(x);
                trans_to.push_back(t);
            }
            trans_off.push_back(int32_t(trans_sym.size()));
        }
    }
    const int32_t n_states = int32_t(states.size());
    out.n_states = n_states;
    out.start_state = 0;
    auto trans_index = [&](int32_t s, int32_t x) {  // the transition of s on x, -1 if none
        auto b = trans_sym.begin() + trans_off[s], e = trans_sym.begin() + trans_off[s + 1];
        auto it = std::lower_bound(b, e, x);
        return it != e && *it == x ? int32_t(it - trans_sym.begin()) : -1;
    };
    out.end_state = trans_to[trans_index(0, g.start)];

    // nonterminal transitions, numbered in transition order
    const int32_t n_trans = int32_t(trans_sym.size());
    std::vector<int32_t> nt_of(size_t(n_trans), -1), nt_state, nt_trans;
    for (int32_t s = 0; s < n_states; ++s)
        for (int32_t k = trans_off[s]; k < trans_off[s + 1]; ++k)
            if (!term[trans_sym[k]]) {
                nt_of[k] = int32_t(nt_state.size());
                nt_state.push_back(s);
                nt_trans.push_back(k);
            }
    const int32_t n_nt = int32_t(nt_state.size());

    // terminal bits: terminals in symbol order, $END last
    std::vector<int32_t> bit_of(size_t(nS), -1), term_of_bit;
    for (int32_t x = 0; x <= END; ++x)
        if (term[x]) bit_of[x] = int32_t(term_of_bit.size()), term_of_bit.push_back(x);
    const size_t n_bits = term_of_bit.size();

    // directly-reads and reads
    BitRows F(size_t(n_nt), n_bits);
    std::vector<int32_t> reads_off{0}, reads;
    for (int32_t n = 0; n < n_nt; ++n) {
        const int32_t r = trans_to[nt_trans[n]];
        if (nt_state[n] == 0 && trans_sym[nt_trans[n]] == g.start) F.set(n, bit_of[END]);
        for (int32_t k = trans_off[r]; k < trans_off[r + 1]; ++k) {
            const int32_t x = trans_sym[k];
            if (term[x]) F.set(n, bit_of[x]);
            else if (nullable[x]) reads.push_back(nt_of[k]);
        }
        reads_off.push_back(int32_t(reads.size()));
    }

    // A walk from a kernel entry (an index into k_items: an item of state entry_state[e]) to
    // the end of its rule, memoised per entry: the state it ends in, and the nonterminal
    // transitions on it that only nullable symbols follow (the includes it contributes; a
    // linked list through inc_list)
    const int32_t n_entries = int32_t(k_items.size());
    std::vector<int32_t> entry_state(static_cast<size_t>(n_entries));
    for (int32_t s = 0; s < n_states; ++s)
        std::fill(entry_state.begin() + k_off[s], entry_state.begin() + k_off[s + 1], s);
    auto entry_of = [&](int32_t s, int32_t item) {  // item's entry in s's kernel
        auto b = k_items.begin() + k_off[s], e = k_items.begin() + k_off[s + 1];
        return int32_t(std::lower_bound(b, e, item) - k_items.begin());
    };
    std::vector<int32_t> walk_end(static_cast<size_t>(n_entries), -1), inc_head(static_cast<size_t>(n_entries), -1);
    std::vector<std::pair<int32_t, int32_t>> inc_list;  // (transition, next in list)
    std::vector<std::array<int32_t, 3>> chain;          // (entry, its transition, the next entry)
    for (int32_t e0 = 0; e0 < n_entries; ++e0) {
        chain.clear();
        for (int32_t e = e0; walk_end[e] < 0;) {
            const int32_t item = k_items[e];
            if (item_next[item] < 0) {
                walk_end[e] = entry_state[e];
                break;
            }
            const int32_t k = trans_index(entry_state[e], item_next[item]);
            const int32_t nxt = entry_of(trans_to[k], item + 1);
            chain.push_back({e, k, nxt});
            e = nxt;
        }
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
            const auto [e, k, nxt] = *it;
            walk_end[e] = walk_end[nxt];
            inc_head[e] = inc_head[nxt];
            if (!term[trans_sym[k]] && rest_nullable[k_items[e] + 1]) {
                inc_list.push_back({nt_of[k], inc_head[e]});
                inc_head[e] = int32_t(inc_list.size()) - 1;
            }
        }
    }

    // includes and lookback: for each nonterminal transition (p, A) walk the rules of A from
    // p (and, as lark does, p's kernel items of A)
    std::vector<std::pair<int32_t, int32_t>> inc;  // (transition, transition it includes)
    std::vector<std::pair<int32_t, int32_t>> lookback;  // (state, lookback id): rule lb_rule[id] for lb_nt[id]
    std::vector<int32_t> lb_rule, lb_nt;
    for (int32_t n = 0; n < n_nt; ++n) {
        const int32_t p = nt_state[n], A = trans_sym[nt_trans[n]];
        auto includes_from = [&](int32_t e) {
            for (int32_t l = inc_head[e]; l >= 0; l = inc_list[l].second) inc.push_back({inc_list[l].first, n});
        };
        for (int32_t i = by_org_off[A]; i < by_org_off[A + 1]; ++i) {
            const int32_t r = by_org[i];
            int32_t end = p;
            if (len(r) > 0) {  // the first step from p, the rest from the entry it reaches
                const int32_t x = rhs[off[r]], k = trans_index(p, x);
                if (!term[x] && rest_nullable[ibase[r] + 1]) inc.push_back({nt_of[k], n});
                const int32_t e = entry_of(trans_to[k], ibase[r] + 1);
                includes_from(e);
                end = walk_end[e];
            }
            lookback.push_back({end, int32_t(lb_rule.size())});
            lb_rule.push_back(r);
            lb_nt.push_back(n);
        }
        for (int32_t e = k_off[p]; e < k_off[p + 1]; ++e)
            if (org[item_rule[k_items[e]]] == A) includes_from(e);
    }

    // Read = digraph(reads, DR); Follow = digraph(includes, Read)
    std::vector<int32_t> h(static_cast<size_t>(n_nt));  // each transition's row of F
    for (int32_t n = 0; n < n_nt; ++n) h[n] = n;
    digraph(n_nt, reads_off, reads, F, h);
    {
        std::vector<int32_t> inc_off, inc_adj;
        to_csr(n_nt, inc, inc_off, inc_adj);
        digraph(n_nt, inc_off, inc_adj, F, h);
    }

    // lookaheads per (state, rule): the union of the Follow sets of its lookbacks; then the
    // actions, terminal by terminal
    std::vector<int32_t> lb_off, lb;
    to_csr(n_states, lookback, lb_off, lb);
    std::vector<int32_t> slot_of(static_cast<size_t>(nRules), -1), slot_rule;
    BitRows la(0, n_bits);
    std::vector<uint64_t> any(la.w);
    std::vector<std::pair<int32_t, int32_t>> cands;  // (terminal bit, rule) in one state
    out.reduce_off.push_back(0);
    for (int32_t s = 0; s < n_states; ++s) {
        slot_rule.clear();
        for (int32_t e = lb_off[s]; e < lb_off[s + 1]; ++e) {
            const int32_t r = lb_rule[lb[e]];
            if (slot_of[r] < 0) slot_of[r] = int32_t(slot_rule.size()), slot_rule.push_back(r);
        }
        std::sort(slot_rule.begin(), slot_rule.end());
        for (size_t i = 0; i < slot_rule.size(); ++i) slot_of[slot_rule[i]] = int32_t(i);
        la.bits.assign(slot_rule.size() * la.w, 0);
        for (int32_t e = lb_off[s]; e < lb_off[s + 1]; ++e) {
            const uint64_t* f = F.row(h[lb_nt[lb[e]]]);
            uint64_t* d = la.row(slot_of[lb_rule[lb[e]]]);
            for (size_t w = 0; w < la.w; ++w) d[w] |= f[w];
        }
        std::fill(any.begin(), any.end(), 0);
        for (size_t i = 0; i < slot_rule.size(); ++i)
            for (size_t w = 0; w < la.w; ++w) any[w] |= la.row(i)[w];
        cands.clear();
        for (size_t w = 0; w < la.w; ++w)
            for (uint64_t bits = any[w]; bits; bits &= bits - 1) {
                const int32_t b = int32_t(w * 64 + __builtin_ctzll(bits));
                for (size_t i = 0; i < slot_rule.size(); ++i)
                    if (la.row(i)[w] >> (b & 63) & 1) cands.push_back({b, slot_rule[i]});
            }
        for (int32_t r : slot_rule) slot_of[r] = -1;
        for (size_t i = 0; i < cands.size();) {
            size_t j = i;
            while (j < cands.size() && cands[j].first == cands[i].first) ++j;
            const int32_t t = term_of_bit[cands[i].first];
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
            if (trans_index(s, t) >= 0) {
                ++out.shift_reduce;  // shift/reduce: shift
            } else {
                out.reduce_term.push_back(t);
                out.reduce_rule.push_back(chosen);
            }
            i = j;
        }
        out.reduce_off.push_back(int32_t(out.reduce_term.size()));
    }
    out.shift_off.push_back(0);
    out.goto_off.push_back(0);
    for (int32_t s = 0; s < n_states; ++s) {
        for (int32_t k = trans_off[s]; k < trans_off[s + 1]; ++k) {
            const bool shift = term[trans_sym[k]];
            (shift ? out.shift_term : out.goto_sym).push_back(trans_sym[k]);
            (shift ? out.shift_to : out.goto_to).push_back(trans_to[k]);
        }
        out.shift_off.push_back(int32_t(out.shift_term.size()));
        out.goto_off.push_back(int32_t(out.goto_sym.size()));
    }
    return out;
}

}  // namespace cad
