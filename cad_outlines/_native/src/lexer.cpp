#include "lexer.h"

#include <algorithm>
#include <stdexcept>

namespace cad {

static void sorted_union(std::vector<int32_t>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

bool Lexer::advance_cons(const std::vector<int32_t>& cons, int b, std::vector<int32_t>& out) const {
    out.clear();
    for (int32_t u : cons) {
        if (g_.l_pending[u] && !g_.l_block[size_t(u) * 256 + b]) return false;  // held-back match confirmed
        int32_t v = g_.l_trans[size_t(u) * 256 + b];
        if (g_.l_label[v] >= 0 && !g_.l_blocked[v]) return false;
        if (g_.l_live[v] || g_.l_label[v] >= 0) out.push_back(v);
    }
    return true;
}

std::vector<int32_t> Lexer::ended_cons(int32_t s, const std::vector<int32_t>& cons) const {
    std::vector<int32_t> out = cons;
    if (g_.l_live[s]) out.push_back(g_.l_shadow[s]);
    if (g_.l_guard[s] >= 0) out.push_back(g_.l_guard[s]);
    sorted_union(out);
    return out;
}

void Lexer::after(int32_t i, int32_t s, std::vector<int32_t>&& cons,
                  std::vector<std::pair<LexCfg, int32_t>>& out) const {
    int32_t lab = g_.l_label[s];
    if (lab >= 0) out.push_back({LexCfg{BOUNDARY, 0, ended_cons(s, cons)}, lab});
    if (g_.l_live[s]) out.push_back({LexCfg{i, s, std::move(cons)}, -1});
}

void Lexer::step(const LexCfg& cfg, int b, std::vector<std::pair<LexCfg, int32_t>>& out) const {
    int32_t s = 0;
    if (cfg.owner != BOUNDARY) {
        s = g_.l_trans[size_t(cfg.state) * 256 + b];
        if (s == g_.l_dead[cfg.owner]) return;
    }
    std::vector<int32_t> base;
    if (!advance_cons(cfg.cons, b, base)) return;
    step_after(cfg.owner, s, b, std::move(base), out);
}

void Lexer::step_after(int32_t owner, int32_t s, int b, std::vector<int32_t>&& base,
                       std::vector<std::pair<LexCfg, int32_t>>& out) const {
    if (owner != BOUNDARY) {
        after(owner, s, std::move(base), out);
        return;
    }
    for (int64_t k = g_.l_starters_off[b]; k < g_.l_starters_off[b + 1]; ++k) {
        int32_t i = g_.l_starters[k];
        size_t ib = size_t(i) * 256 + b;
        if (g_.l_comp_none[ib]) continue;
        std::vector<int32_t> cons = base;
        for (int64_t c = g_.l_comp_off[ib]; c < g_.l_comp_off[ib + 1]; ++c) cons.push_back(g_.l_comp[c]);
        sorted_union(cons);
        after(i, g_.l_first[ib], std::move(cons), out);
    }
}

static int32_t indent_step(int32_t acc, int b, int32_t tab) {
    if (b == 10) return 0;
    if (acc < 0) return acc;
    return b == 32 ? acc + 1 : b == 9 ? acc + tab : acc;
}

void Lexer::run(int32_t cfg_id, const uint8_t* data, size_t n, int32_t acc, std::vector<LexEnd>& out) const {
    out.clear();
    const int32_t nl_owner = g_.indent_owner, nl_label = g_.indent_label, tab = g_.tab_len;
    std::vector<Front> frontier, nxt;
    {
        Front f;
        f.c.owner = g_.c_owner[cfg_id];
        f.c.state = g_.c_state[cfg_id];
        f.c.cons.assign(g_.c_cons.p + g_.c_cons_off[cfg_id], g_.c_cons.p + g_.c_cons_off[cfg_id + 1]);
        f.acc = acc;
        frontier.push_back(std::move(f));
    }
    std::vector<std::pair<LexCfg, int32_t>> succ;
    for (size_t pos = 0; pos < n && !frontier.empty(); ++pos) {
        int b = data[pos];
        nxt.clear();
        for (const Front& f : frontier) {
            succ.clear();
            step(f.c, b, succ);
            for (auto& [c2, lab] : succ) {
                int32_t a2 = 0;
                if (nl_owner >= 0) {
                    int32_t owner;
                    if (f.c.owner != BOUNDARY) owner = f.c.owner;
                    else if (lab < 0) owner = c2.owner;
                    else owner = lab == nl_label ? nl_owner : -2;  // a lexeme started and ended on this byte
                    if (owner == nl_owner) a2 = indent_step(f.c.owner == nl_owner ? f.acc : NO_LINE_BREAK, b, tab);
                }
                Front e{std::move(c2), f.emitted, lab < 0 ? a2 : 0};
                if (lab >= 0 && !g_.l_ignored[lab]) {
                    if (lab == nl_label) {
                        if (a2 < 0) continue;  // lark's Indenter cannot read a NEWLINE without a line break
                        e.emitted.push_back(INDENT_BASE + 2 * a2 + 1);
                    } else {
                        e.emitted.push_back(lab);
                    }
                }
                bool dup = false;
                for (const Front& o : nxt)
                    if (o.acc == e.acc && o.c == e.c && o.emitted == e.emitted) {
                        dup = true;
                        break;
                    }
                if (!dup) nxt.push_back(std::move(e));
            }
        }
        std::swap(frontier, nxt);
    }
    for (Front& f : frontier) {
        int32_t id = g_.find_config(f.c.owner, f.c.state, f.c.cons.data(), f.c.cons.size());
        if (id < 0) throw std::runtime_error("internal: a token led to a lexer configuration missing from the store");
        out.push_back({id, std::move(f.emitted), f.acc});
    }
}

}  // namespace cad
