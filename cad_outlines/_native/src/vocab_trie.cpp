#include "vocab_trie.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace cad {

uint64_t byte_class(uint8_t b) {
    static const auto classes = [] {
        std::array<uint64_t, 256> c{};
        int next = 0;
        const int controls = next++;
        for (int x = 0; x < 128; ++x) {
            const bool alnum = (x >= '0' && x <= '9') || (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z');
            const bool control = (x < 32 && x != 9 && x != 10 && x != 13) || x == 127;
            if (!alnum) c[x] = uint64_t(1) << (control ? controls : next++);
        }
        auto range = [&](int lo, int hi) {
            const int k = next++;
            for (int x = lo; x <= hi; ++x) c[x] = uint64_t(1) << k;
        };
        range('0', '1'), range('2', '7'), range('8', '9');
        range('a', 'f'), range('g', 'z'), range('A', 'F'), range('G', 'Z');
        range(0x80, 0xBF), range(0xC0, 0xFF);
        return c;
    }();
    return classes[b];
}

// UTF-8 read byte by byte along a path: the continuation bytes a character still needs, and the
// range the next one must fall in (the first continuation of E0, ED, F0 and F4 is narrower)
static bool plain_step(uint8_t b, int& need, uint8_t& lo, uint8_t& hi) {
    if (need) {
        if (b < lo || b > hi) return need = 0, false;
        --need, lo = 0x80, hi = 0xBF;
        return true;
    }
    lo = 0x80, hi = 0xBF;
    if (b < 0x80) return b >= 0x20 && b != '"' && b != '\\';
    if (b >= 0xC2 && b <= 0xDF) return need = 1, true;
    if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
        return true;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
        return true;
    }
    return false;
}

void VocabTrie::plain_below_(int32_t N, const std::vector<std::pair<int32_t, int32_t>>& tok_at) {
    // along each path (preorder: a node's parent is the last node one level up): the characters
    // completed, the continuation bytes still owed, the depth of the last byte outside a plain character
    std::vector<int32_t> chars(N), last_bad(N), parent(N, -1), up;
    std::vector<int8_t> need(N);
    std::vector<uint8_t> lo(N), hi(N);
    std::vector<uint8_t> ends(N, 0);  // a token ends at the node
    for (auto& [node, t] : tok_at) ends[node] = 1;
    for (int32_t i = 0; i < N; ++i) {
        const int32_t d = depth[i];
        up.resize(size_t(d - 1));
        const int32_t p = d > 1 ? up[size_t(d - 2)] : -1;
        parent[i] = p;
        int nd = p >= 0 ? need[p] : 0;
        uint8_t l = p >= 0 ? lo[p] : 0x80, h = p >= 0 ? hi[p] : 0xBF;
        const bool ok = plain_step(byte[i], nd, l, h);
        need[i] = int8_t(nd), lo[i] = l, hi[i] = h;
        chars[i] = (p >= 0 ? chars[p] : 0) + (ok && nd == 0 ? 1 : 0);
        last_bad[i] = ok ? (p >= 0 ? last_bad[p] : 0) : d;
        up.push_back(i);
    }
    // aggregates over each node's strict subtree, children first (reverse preorder)
    std::vector<int32_t> max_bad(N, -1), max_chars(N, -1);
    std::vector<uint8_t> partial(N, 0);
    plain_chars_below.assign(N, -1);
    for (int32_t i = N; i-- > 0;) {
        const int32_t p = parent[i];
        if (p < 0) continue;
        int32_t mb = max_bad[i], mc = max_chars[i];
        bool pt = partial[i];
        if (ends[i]) mb = std::max(mb, last_bad[i]), mc = std::max(mc, chars[i]), pt = pt || need[i] != 0;
        max_bad[p] = std::max(max_bad[p], mb);
        max_chars[p] = std::max(max_chars[p], mc);
        partial[p] = partial[p] || pt;
    }
    for (int32_t i = 0; i < N; ++i)
        if (need[i] == 0 && max_chars[i] >= 0 && !partial[i] && max_bad[i] <= depth[i])
            plain_chars_below[i] = max_chars[i] - chars[i];
}

VocabTrie::VocabTrie(const int64_t* off, const uint8_t* bytes, const uint32_t* allowed, int32_t n_vocab)
    : vocab_size(n_vocab) {
    std::fill(first_child, first_child + 256, -1);
    auto len = [&](int32_t t) { return size_t(off[t + 1] - off[t]); };
    auto at = [&](int32_t t) { return bytes + off[t]; };
    std::vector<int32_t> ids;
    for (int32_t t = 0; t < n_vocab; ++t)
        if (len(t) && (allowed[t >> 5] >> (t & 31) & 1)) ids.push_back(t);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
        size_t la = len(a), lb = len(b);
        int c = std::memcmp(at(a), at(b), std::min(la, lb));
        return c ? c < 0 : la != lb ? la < lb : a < b;
    });
    // preorder: a token shares the path of its predecessor up to their common prefix
    std::vector<int32_t> path;  // node at each depth - 1 of the current path
    const uint8_t* prev = nullptr;
    size_t prev_len = 0;
    std::vector<int32_t> node_tokens_start;
    std::vector<std::pair<int32_t, int32_t>> tok_at;  // (node, token), nodes nondecreasing
    for (int32_t t : ids) {
        const uint8_t* s = at(t);
        size_t n = len(t), common = 0;
        if (prev)
            while (common < std::min(n, prev_len) && s[common] == prev[common]) ++common;
        path.resize(std::min(common, path.size()));
        for (size_t d = path.size(); d < n; ++d) {
            int32_t id = int32_t(byte.size());
            byte.push_back(s[d]);
            depth.push_back(int32_t(d + 1));
            if (d == 0) first_child[s[0]] = id;
            path.push_back(id);
        }
        tok_at.push_back({path[n - 1], t});
        prev = s;
        prev_len = n;
        max_depth = std::max(max_depth, int32_t(n));
        max_len_from[s[0]] = std::max(max_len_from[s[0]], int32_t(n));
    }
    const int32_t N = int32_t(byte.size());
    // subtree ends: a node's subtree ends at the next node of depth <= its own
    subtree_end.assign(N, N);
    below.assign(N, 0);
    std::vector<int32_t> open;  // stack of nodes whose subtree is still open
    auto close = [&](int32_t end) {
        const int32_t j = open.back();
        subtree_end[j] = end;
        open.pop_back();
        if (!open.empty()) below[open.back()] |= below[j] | byte_class(byte[j]);
    };
    for (int32_t i = 0; i < N; ++i) {
        while (!open.empty() && depth[open.back()] >= depth[i]) close(i);
        open.push_back(i);
    }
    while (!open.empty()) close(N);
    plain_below_(N, tok_at);
    tok_off.assign(N + 1, 0);
    for (auto& [node, t] : tok_at) ++tok_off[node + 1];
    for (int32_t i = 0; i < N; ++i) tok_off[i + 1] += tok_off[i];
    tok_ids.resize(tok_at.size());
    std::vector<int32_t> fill(tok_off.begin(), tok_off.end() - 1);
    for (auto& [node, t] : tok_at) tok_ids[fill[node]++] = t;
}

}  // namespace cad
