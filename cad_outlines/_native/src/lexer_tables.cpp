#include "lexer_tables.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace cad {

LexerArrays lexer_arrays(const std::vector<TerminalView>& terms, const std::vector<int32_t>& groups) {
    LexerArrays a;
    const int32_t k = int32_t(terms.size());
    if (!groups.empty() && groups.size() != terms.size())
        throw std::invalid_argument("lexer_automaton: groups has " + std::to_string(groups.size()) + " entries for " +
                                    std::to_string(terms.size()) + " terminals");
    auto group = [&](int32_t i) { return groups.empty() ? 0 : groups[size_t(i)]; };
    a.n_terminals = a.n_labels = k;
    // guard runs (LexerSpec.__post_init__): one per distinct block row of a pending accepting
    // state (accepting, some byte blocks it), in order of first appearance
    std::vector<TerminalView> autos(terms);
    std::vector<TerminalTables> guards;
    std::vector<std::pair<int64_t, int32_t>> guard_of;  // (terminal << 32 | state, automaton)
    std::map<std::string, int32_t> rows;
    for (int32_t i = 0; i < k; ++i) {
        const TerminalView& t = terms[i];
        for (int32_t s = 0; s < t.n; ++s) {
            if (t.label[s] < 0 || !t.blocked[s]) continue;
            std::string key(reinterpret_cast<const char*>(t.block + size_t(s) * 256), 256);
            auto [it, fresh] = rows.emplace(key, int32_t(autos.size()));
            if (fresh) {
                int32_t tr[512];
                for (int b = 0; b < 256; ++b) tr[b] = t.block[size_t(s) * 256 + b] ? 1 : -1, tr[256 + b] = -1;
                const int32_t lab[2] = {-1, 0};
                guards.push_back(terminal_tables(2, tr, lab, nullptr));
                autos.push_back(TerminalView{});  // filled below, once `guards` stops moving
            }
            guard_of.push_back({(int64_t(i) << 32) | uint32_t(s), it->second});
        }
    }
    for (size_t j = 0; j < guards.size(); ++j) {
        const TerminalTables& g = guards[j];
        autos[size_t(k) + j] = TerminalView{g.m + 1, g.trans.data(), g.label.data(), g.live.data(), g.block.data(),
                                            g.blocked.data(), g.shadow.data()};
    }
    // every automaton's states end to end
    const size_t n_autos = autos.size();
    a.l_auto_off.assign(n_autos + 1, 0);
    for (size_t i = 0; i < n_autos; ++i) a.l_auto_off[i + 1] = a.l_auto_off[i] + autos[i].n;
    const size_t total = size_t(a.l_auto_off[n_autos]);
    a.l_trans.resize(total * 256);
    a.l_label.resize(total);
    a.l_live.resize(total);
    a.l_block.resize(total * 256);
    a.l_blocked.resize(total);
    a.l_pending.resize(total);
    a.l_shadow.resize(total);
    a.l_dead.resize(n_autos);
    a.l_guard.assign(total, -1);
    for (size_t i = 0; i < n_autos; ++i) {
        const TerminalView& t = autos[i];
        const int32_t off = a.l_auto_off[i];
        const bool terminal = i < size_t(k);
        for (int32_t s = 0; s < t.n; ++s) {
            const size_t gs = size_t(off) + s;
            for (int b = 0; b < 256; ++b) a.l_trans[gs * 256 + b] = t.trans[size_t(s) * 256 + b] + off;
            std::copy_n(t.block + size_t(s) * 256, 256, a.l_block.begin() + gs * 256);
            a.l_label[gs] = t.label[s] < 0 ? -1 : terminal ? int32_t(i) : t.label[s];
            a.l_live[gs] = t.live[s];
            a.l_blocked[gs] = t.blocked[s];
            a.l_pending[gs] = t.label[s] >= 0 && t.blocked[s];
            a.l_shadow[gs] = t.shadow[s] + off;
        }
        a.l_dead[i] = off + t.n - 1;
    }
    for (const auto& [key, gidx] : guard_of)
        a.l_guard[size_t(a.l_auto_off[size_t(key >> 32)]) + size_t(key & 0xffffffff)] = a.l_auto_off[gidx];
    // first bytes, starters (per byte, the terminals that can start with it)
    a.l_first.resize(size_t(k) * 256);
    for (int32_t i = 0; i < k; ++i)
        for (int b = 0; b < 256; ++b) a.l_first[size_t(i) * 256 + b] = autos[i].trans[b] + a.l_auto_off[i];
    a.l_starters_off.assign(257, 0);
    for (int b = 0; b < 256; ++b) {
        for (int32_t i = 0; i < k; ++i)
            if (a.l_first[size_t(i) * 256 + b] != a.l_dead[i]) a.l_starters.push_back(i);
        a.l_starters_off[b + 1] = int64_t(a.l_starters.size());
    }
    // competitors (LexerSpec.competitor_arrays): owner i starting with byte b runs against the
    // terminals j < i of its group still running after b, unless one of them already accepts on b
    std::map<int32_t, std::vector<int32_t>> members;  // group -> its terminals, ascending
    for (int32_t i = 0; i < k; ++i) members[group(i)].push_back(i);
    std::vector<uint8_t> runs(size_t(k) * 256);
    std::vector<int32_t> killer(size_t(k) * 256, k);  // per owner and byte: its group's first terminal accepting
    for (const auto& [gid, idx] : members) {
        int32_t first[256];
        std::fill_n(first, 256, k);
        for (int32_t j : idx)
            for (int b = 0; b < 256; ++b) {
                const int32_t g = a.l_first[size_t(j) * 256 + b];
                const bool accepts = a.l_label[g] >= 0;
                if (accepts && !a.l_blocked[g] && first[b] == k) first[b] = j;
                runs[size_t(j) * 256 + b] = a.l_live[g] || accepts;
            }
        for (int32_t j : idx) std::copy_n(first, 256, killer.begin() + size_t(j) * 256);
    }
    a.l_comp_none.resize(size_t(k) * 256);
    a.l_comp_off.assign(size_t(k) * 256 + 1, 0);
    for (int32_t i = 0; i < k; ++i) {
        const std::vector<int32_t>& idx = members[group(i)];
        for (int b = 0; b < 256; ++b) {
            const size_t ib = size_t(i) * 256 + b;
            a.l_comp_none[ib] = killer[ib] < i;
            if (!a.l_comp_none[ib])
                for (int32_t j : idx) {
                    if (j >= i) break;
                    if (runs[size_t(j) * 256 + b]) a.l_comp.push_back(a.l_first[size_t(j) * 256 + b]);
                }
            a.l_comp_off[ib + 1] = int64_t(a.l_comp.size());
        }
    }
    a.l_ignored.assign(size_t(k), 0);
    return a;
}

}  // namespace cad
