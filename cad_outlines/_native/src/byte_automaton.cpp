#include "byte_automaton.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "flat_map.h"
#include "hash.h"
#include "lexer.h"

namespace cad {

namespace {

struct Builder {
    const Grammar& g;
    Lexer lx;
    ByteAutomaton a;
    std::vector<LexCfg> cfgs;
    struct Edge {
        int32_t nxt, raw, lab;  // raw: the label as lexed (-1: none)
        uint8_t kind, ends_nl;
    };
    std::vector<Edge> built;  // a's edges while they are built (with their raw labels)
    InternIndex index;  // the configurations, by hash
    size_t max_states;

    Builder(const Grammar& g_, size_t max_states_) : g(g_), lx(g_), max_states(max_states_) {}

    int32_t intern(LexCfg&& c) {
        const int32_t head[2] = {c.owner, c.state};
        const uint64_t h = fnv1a(c.cons.data(), c.cons.size(), fnv1a(head, 2));
        auto [id, fresh] = index.find_or_add(h, [&](int32_t v) { return cfgs[v] == c; });
        if (!fresh) return id;
        if (cfgs.size() >= max_states)
            throw std::length_error("the lexer has more than " + std::to_string(max_states) +
                                    " configurations (terminals whose runs interleave without bound)");
        cfgs.push_back(std::move(c));
        return id;
    }

    // A step's successors depend only on (owner, the lexeme's state after the byte, the
    // advanced constraint runs), or for a boundary on (the byte, the advanced runs): the
    // edges of each such key are built once (a step: the range [lo, hi) of its edges) and
    // copied for every other (configuration, byte) with it. Keys without constraint runs
    // are looked up by state or byte, the others by hash.
    std::vector<int64_t> step_lo, step_hi;
    std::vector<int32_t> by_state, by_byte;    // key without runs -> its step (-1: none yet)
    InternIndex keyed_index;                   // the keys with runs, by hash
    std::vector<int32_t> keyed, keyed_step;    // keys (CSR keyed_off), their steps
    std::vector<int64_t> keyed_off{0};

    // The step of `key` (owner, state or byte, runs...), added (its edges are the ones
    // appended next) if new: (step, whether it is new).
    std::pair<int32_t, bool> keyed_step_of(const std::vector<int32_t>& key) {
        const uint64_t h = fnv1a(key.data(), key.size(), FNV_OFFSET ^ key.size());
        auto [v, fresh] = keyed_index.find_or_add(h, [&](int32_t u) {
            return size_t(keyed_off[u + 1] - keyed_off[u]) == key.size() &&
                   std::equal(key.begin(), key.end(), keyed.begin() + keyed_off[u]);
        });
        if (!fresh) return {keyed_step[v], false};
        keyed.insert(keyed.end(), key.begin(), key.end());
        keyed_off.push_back(int64_t(keyed.size()));
        keyed_step.push_back(new_step());
        return {keyed_step.back(), true};
    }

    int32_t new_step() {
        step_lo.push_back(int64_t(built.size()));
        step_hi.push_back(-1);
        return int32_t(step_lo.size()) - 1;
    }

    // Bytes no automaton state tells apart (same successor and block flag in every state) have the
    // same edges from every configuration: they form a class, numbered in order of their first byte,
    // and the edges are stored once per (configuration, class). The indenter's bytes (tab, line
    // feed, space) are kept apart, as the indentation reads them.
    int rep[256];  // each class's first byte, by class
    int n_classes = 0;

    void byte_classes() {
        const size_t n = g.l_label.size();
        uint64_t h[256];
        for (int b = 0; b < 256; ++b) h[b] = FNV_OFFSET;
        for (size_t u = 0; u < n; ++u) {
            const int32_t* t = g.l_trans.p + u * 256;
            const uint8_t* k = g.l_block.p + u * 256;
            for (int b = 0; b < 256; ++b) h[b] = (h[b] ^ (uint64_t(uint32_t(t[b])) << 1 | k[b])) * FNV_PRIME;
        }
        a.a_class.assign(256, 0);
        auto own = [](int b) { return b == 9 || b == 10 || b == 32; };
        // by hash first, then every column checked against its class's first in one pass over the rows
        // (row by row: a column is read with a stride of a row); a collision: compared column by column
        for (int b = 0; b < 256; ++b) {
            int cls = -1;
            for (int k = 0; k < n_classes && cls < 0 && !own(b); ++k)
                if (!own(rep[k]) && h[rep[k]] == h[b]) cls = k;
            if (cls < 0) {
                cls = n_classes++;
                rep[cls] = b;
            }
            a.a_class[b] = uint8_t(cls);
        }
        bool same = true;
        for (size_t u = 0; u < n && same; ++u) {
            const int32_t* t = g.l_trans.p + u * 256;
            const uint8_t* k = g.l_block.p + u * 256;
            for (int b = 0; b < 256; ++b) {
                const int r = rep[a.a_class[b]];
                same &= t[b] == t[r] && k[b] == k[r];
            }
        }
        if (same) {
            a.n_classes = n_classes;
            return;
        }
        n_classes = 0;
        for (int b = 0; b < 256; ++b) {
            int cls = -1;
            for (int k = 0; k < n_classes && cls < 0 && !own(b); ++k) {
                const int r = rep[k];
                if (own(r) || h[r] != h[b]) continue;
                bool same = true;  // hashes agree: check the columns themselves
                for (size_t u = 0; u < n && same; ++u)
                    same = g.l_trans.p[u * 256 + b] == g.l_trans.p[u * 256 + r] &&
                           g.l_block.p[u * 256 + b] == g.l_block.p[u * 256 + r];
                if (same) cls = k;
            }
            if (cls < 0) {
                cls = n_classes++;
                rep[cls] = b;
            }
            a.a_class[b] = uint8_t(cls);
        }
        a.n_classes = n_classes;
    }

    void edges() {
        const int32_t nl_owner = g.indent_owner, nl_label = g.indent_label;
        std::vector<std::pair<LexCfg, int32_t>> succ;
        std::vector<int32_t> base, key;
        by_state.assign(g.l_label.size(), -1);
        by_byte.assign(256, -1);
        byte_classes();
        intern(LexCfg{});
        a.a_ptr.push_back(0);
        for (size_t c = 0; c < cfgs.size(); ++c) {  // ids are given in this order, so edges are CSR
            const LexCfg cur = cfgs[c];
            const bool boundary = cur.owner == BOUNDARY;
            const int32_t* row = g.l_trans.p + (boundary ? 0 : size_t(cur.state) * 256);  // the lexeme's
            const int32_t dead = boundary ? -1 : g.l_dead[cur.owner];
            for (int k = 0; k < n_classes; ++k) {
                const int b = rep[k];
                const int32_t s = boundary ? 0 : row[b];
                if (s != dead && lx.advance_cons(cur.cons, b, base)) {
                    int32_t step;
                    bool fresh;
                    if (base.empty()) {
                        int32_t& slot = boundary ? by_byte[b] : by_state[s];
                        if ((fresh = slot < 0)) slot = new_step();
                        step = slot;
                    } else {
                        key.assign({cur.owner, boundary ? b : s});
                        key.insert(key.end(), base.begin(), base.end());
                        std::tie(step, fresh) = keyed_step_of(key);
                    }
                    if (fresh) {
                        succ.clear();
                        lx.step_after(cur.owner, s, b, std::move(base), succ);
                        for (auto& [c2, lab] : succ) {
                            const int32_t owner2 = c2.owner;
                            uint8_t kind = EDGE_PLAIN;
                            if (nl_owner >= 0 && cur.owner == nl_owner)
                                kind = EDGE_NL_GOES_ON;
                            else if (cur.owner == BOUNDARY && nl_owner >= 0 &&
                                     (owner2 == nl_owner || (lab >= 0 && lab == nl_label)))
                                kind = EDGE_NL_STARTS;
                            built.push_back({intern(std::move(c2)), lab, lab < 0 || g.l_ignored[lab] ? -1 : lab, kind,
                                           uint8_t(lab >= 0 && lab == nl_label)});
                        }
                        step_hi[step] = int64_t(built.size());
                    } else {
                        for (int64_t e = step_lo[step]; e < step_hi[step]; ++e) built.push_back(Edge(built[e]));
                    }
                }
                a.a_ptr.push_back(int64_t(built.size()));
            }
        }
    }

    bool has_pending(const std::vector<int32_t>& cons) const {
        for (int32_t u : cons)
            if (g.l_pending[u]) return true;
        return false;
    }

    // Lexer.viable_labels of every configuration (ByteAutomaton.viable_labels): labels
    // ending some path of lexeme-continuing edges on an edge into a boundary that can be
    // followed by a byte or by the end of the text.
    std::vector<uint64_t> viable(size_t W) {
        const size_t n = cfgs.size();
        std::vector<int8_t> can_end(n, -1);
        std::vector<int32_t> tmp;
        auto ends_ok = [&](int32_t t) {
            if (can_end[t] < 0) {
                const auto& cons = cfgs[t].cons;
                bool ok = !has_pending(cons);
                for (int b = 0; b < 256 && !ok; ++b) ok = lx.advance_cons(cons, b, tmp);
                can_end[t] = ok;
            }
            return can_end[t] == 1;
        };
        std::vector<uint64_t> bits(n * W, 0);
        std::vector<std::vector<int32_t>> preds(n);
        for (size_t c = 0; c < n; ++c) {
            if (cfgs[c].owner == BOUNDARY) continue;
            for (int64_t e = a.a_ptr[c * n_classes]; e < a.a_ptr[(c + 1) * n_classes]; ++e) {
                const int32_t t = built[e].nxt, r = built[e].raw;
                if (r >= 0) {
                    if (ends_ok(t)) bits[c * W + r / 64] |= uint64_t(1) << (r % 64);
                } else {
                    preds[t].push_back(int32_t(c));
                }
            }
        }
        std::vector<int32_t> todo;
        for (size_t c = 0; c < n; ++c)
            for (size_t w = 0; w < W; ++w)
                if (bits[c * W + w]) {
                    todo.push_back(int32_t(c));
                    break;
                }
        while (!todo.empty()) {
            const int32_t t = todo.back();
            todo.pop_back();
            for (int32_t c : preds[t]) {
                bool grew = false;
                for (size_t w = 0; w < W; ++w) {
                    const uint64_t add = bits[t * W + w] & ~bits[c * W + w];
                    if (add) {
                        bits[c * W + w] |= add;
                        grew = true;
                    }
                }
                if (grew) todo.push_back(c);
            }
        }
        return bits;
    }

    void configs() {
        const size_t n = cfgs.size();
        const size_t W = size_t(std::max<int32_t>(g.n_labels, 1) + 63) / 64;
        const std::vector<uint64_t> bits = viable(W);
        std::map<std::vector<int32_t>, int32_t> ent_ids;
        std::vector<const std::vector<int32_t>*> ent_order;
        a.c_cons_off.push_back(0);
        a.c_entered_off.push_back(0);
        a.e_off.push_back(0);
        std::vector<int32_t> ent;
        for (size_t c = 0; c < n; ++c) {
            const LexCfg& cfg = cfgs[c];
            a.c_owner.push_back(cfg.owner);
            a.c_state.push_back(cfg.owner == BOUNDARY ? 0 : cfg.state);
            a.c_cons.insert(a.c_cons.end(), cfg.cons.begin(), cfg.cons.end());
            a.c_cons_off.push_back(int64_t(a.c_cons.size()));
            a.a_in_nl.push_back(g.indent_owner >= 0 && cfg.owner == g.indent_owner);
            // Lexer.entered
            ent.clear();
            bool valid = true;
            if (cfg.owner != BOUNDARY) {
                for (size_t w = 0; w < W; ++w)
                    for (uint64_t x = bits[c * W + w]; x; x &= x - 1) {
                        const int32_t lab = int32_t(w * 64 + __builtin_ctzll(x));
                        ent.push_back(g.l_ignored[lab] ? -1 : lab);
                    }
                std::sort(ent.begin(), ent.end());
                valid = !ent.empty();
            }
            a.c_entered_valid.push_back(valid);
            a.c_entered.insert(a.c_entered.end(), ent.begin(), ent.end());
            a.c_entered_off.push_back(int64_t(a.c_entered.size()));
            if (!valid) {
                a.c_ent.push_back(-1);
            } else {
                auto [it, fresh] = ent_ids.emplace(ent, int32_t(ent_ids.size()));
                if (fresh) {
                    a.e_labels.insert(a.e_labels.end(), ent.begin(), ent.end());
                    a.e_off.push_back(int32_t(a.e_labels.size()));
                }
                a.c_ent.push_back(it->second);
            }
            // Lexer.final_labels: -2 the text cannot end here, -1 nothing pending,
            // -3 an ignored lexeme ends, else its label
            int32_t fin;
            if (has_pending(cfg.cons)) fin = -2;
            else if (cfg.owner == BOUNDARY) fin = -1;
            else {
                const int32_t lab = g.l_label[cfg.state];
                fin = lab < 0 ? -2 : g.l_ignored[lab] ? -3 : lab;
            }
            a.c_final.push_back(fin);
        }
    }
};

}  // namespace

ByteAutomaton build_byte_automaton(const Grammar& g, size_t max_states) {
    Builder b(g, max_states);
    b.edges();
    b.configs();
    const size_t n = b.built.size();
    b.a.a_nxt.resize(n);
    b.a.a_lab.resize(n);
    b.a.a_kind.resize(n);
    b.a.a_ends_nl.resize(n);
    for (size_t e = 0; e < n; ++e) {
        b.a.a_nxt[e] = b.built[e].nxt;
        b.a.a_lab[e] = b.built[e].lab;
        b.a.a_kind[e] = b.built[e].kind;
        b.a.a_ends_nl[e] = b.built[e].ends_nl;
    }
    return std::move(b.a);
}

}  // namespace cad
