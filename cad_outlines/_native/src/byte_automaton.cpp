#include "byte_automaton.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "lexer.h"

namespace cad {

namespace {

struct Builder {
    const Grammar& g;
    Lexer lx;
    ByteAutomaton a;
    std::vector<LexCfg> cfgs;
    std::unordered_map<std::string, int32_t> ids;
    size_t max_states;

    Builder(const Grammar& g_, size_t max_states_) : g(g_), lx(g_), max_states(max_states_) {}

    int32_t intern(LexCfg&& c) {
        std::string k = config_key(c.owner, c.state, c.cons.data(), c.cons.size());
        auto it = ids.find(k);
        if (it != ids.end()) return it->second;
        if (cfgs.size() >= max_states)
            throw std::length_error("the lexer has more than " + std::to_string(max_states) +
                                    " configurations (terminals whose runs interleave without bound)");
        int32_t id = int32_t(cfgs.size());
        ids.emplace(std::move(k), id);
        cfgs.push_back(std::move(c));
        return id;
    }

    void edges() {
        const int32_t nl_owner = g.indent_owner, nl_label = g.indent_label;
        std::vector<std::pair<LexCfg, int32_t>> succ;
        intern(LexCfg{});
        a.a_ptr.push_back(0);
        for (size_t c = 0; c < cfgs.size(); ++c) {  // ids are given in this order, so edges are CSR
            const LexCfg cur = cfgs[c];
            for (int b = 0; b < 256; ++b) {
                succ.clear();
                lx.step(cur, b, succ);
                for (auto& [c2, lab] : succ) {
                    const int32_t owner2 = c2.owner;
                    uint8_t kind = EDGE_PLAIN;
                    if (nl_owner >= 0 && cur.owner == nl_owner)
                        kind = EDGE_NL_GOES_ON;
                    else if (cur.owner == BOUNDARY && nl_owner >= 0 &&
                             (owner2 == nl_owner || (lab >= 0 && lab == nl_label)))
                        kind = EDGE_NL_STARTS;
                    a.a_nxt.push_back(intern(std::move(c2)));
                    a.a_raw.push_back(lab);
                    a.a_lab.push_back(lab < 0 || g.l_ignored[lab] ? -1 : lab);
                    a.a_kind.push_back(kind);
                    a.a_ends_nl.push_back(lab >= 0 && lab == nl_label);
                }
                a.a_ptr.push_back(int64_t(a.a_nxt.size()));
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
            for (int64_t e = a.a_ptr[c * 256]; e < a.a_ptr[c * 256 + 256]; ++e) {
                const int32_t t = a.a_nxt[e], r = a.a_raw[e];
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
    b.a.a_raw.clear();
    b.a.a_raw.shrink_to_fit();
    return std::move(b.a);
}

}  // namespace cad
