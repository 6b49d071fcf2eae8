// See dfa.h.
#include "dfa.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "hash.h"

namespace cad {

namespace {

constexpr int32_t MIXED = -2;

struct Intervals {
    const int64_t *lo, *hi;
    const int32_t* tgt;
    int64_t n;
    // index of the last interval starting at or before c, or -1
    int64_t find(int64_t c) const {
        int64_t i = std::upper_bound(lo, lo + n, c) - lo - 1;
        return i;
    }
    int32_t point(int64_t c) const {
        int64_t i = find(c);
        return (i >= 0 && hi[i] > c) ? tgt[i] : -1;
    }
    // the target of every code point in [a, b) if uniform (-1: none), else MIXED
    int32_t uniform(int64_t a, int64_t b) const {
        int64_t i = find(a);
        if (i >= 0 && hi[i] > a) return hi[i] >= b ? tgt[i] : MIXED;
        if (i + 1 < n && lo[i + 1] < b) return MIXED;
        return -1;
    }
};

struct ArrayHash {
    size_t operator()(const std::array<int32_t, 64>& a) const {
        return size_t(fnv1a(a.data(), a.size()));
    }
};

class Expander {
public:
    explicit Expander(int32_t n) : n_(n) {}

    int32_t intern(const std::array<int32_t, 64>& children) {
        auto it = memo_.find(children);
        if (it != memo_.end()) return it->second;
        int32_t id = n_ + int32_t(extra_.size());
        memo_.emplace(children, id);
        extra_.push_back(children);
        return id;
    }

    int32_t uniform_node(int32_t t, int level) {
        uint64_t key = (uint64_t(uint32_t(t)) << 2) | uint64_t(level);
        auto it = uniform_.find(key);
        if (it != uniform_.end()) return it->second;
        int32_t child = level == 1 ? t : uniform_node(t, level - 1);
        std::array<int32_t, 64> ch;
        ch.fill(child);
        int32_t id = intern(ch);
        uniform_.emplace(key, id);
        return id;
    }

    int32_t node(const Intervals& iv, int64_t base, int level, int64_t vmin, int64_t vmax) {
        const int64_t size = int64_t(1) << (6 * level);
        const int64_t a = std::max(base, vmin), b = std::min(base + size, vmax + 1);
        if (a >= b) return -1;
        const int32_t u = iv.uniform(a, b);
        if (u == -1) return -1;
        if (u != MIXED && a == base && b == base + size) return uniform_node(u, level);
        std::array<int32_t, 64> ch;
        const int64_t sub = size >> 6;
        bool any = false;
        for (int i = 0; i < 64; ++i) {
            if (level == 1) {
                const int64_t cp = base + i;
                ch[i] = (cp < vmin || cp > vmax) ? -1 : iv.point(cp);
            } else {
                ch[i] = node(iv, base + i * sub, level - 1, vmin, vmax);
            }
            any |= ch[i] != -1;
        }
        return any ? intern(ch) : -1;
    }

    const std::vector<std::array<int32_t, 64>>& extra() const { return extra_; }

private:
    int32_t n_;
    std::vector<std::array<int32_t, 64>> extra_;
    std::unordered_map<std::array<int32_t, 64>, int32_t, ArrayHash> memo_;
    std::unordered_map<uint64_t, int32_t> uniform_;
};

// (first lead byte, last lead byte, continuation bytes, lowest / highest code point)
struct Utf8Class {
    int first, last, k;
    int64_t vmin, vmax;
};
constexpr Utf8Class UTF8_CLASSES[3] = {
    {0xC2, 0xDF, 1, 0x80, 0x7FF}, {0xE0, 0xEF, 2, 0x800, 0xFFFF}, {0xF0, 0xF4, 3, 0x10000, 0x10FFFF}};
constexpr int LEAD_BASE[3] = {0xC0, 0xE0, 0xF0};

}  // namespace

std::vector<int32_t> utf8_expand(int32_t n, const int64_t* iv_off, const int64_t* lo, const int64_t* hi,
                                 const int32_t* tgt) {
    Expander ex(n);
    std::vector<int32_t> rows(size_t(n) * 256, -1);
    for (int32_t s = 0; s < n; ++s) {
        Intervals iv{lo + iv_off[s], hi + iv_off[s], tgt + iv_off[s], iv_off[s + 1] - iv_off[s]};
        if (iv.n == 0) continue;
        int32_t* row = rows.data() + size_t(s) * 256;
        for (int c = 0; c < 0x80; ++c) row[c] = iv.point(c);
        for (const auto& cls : UTF8_CLASSES)
            for (int lead = cls.first; lead <= cls.last; ++lead) {
                const int64_t base = int64_t(lead - LEAD_BASE[cls.k - 1]) << (6 * cls.k);
                row[lead] = ex.node(iv, base, cls.k, cls.vmin, cls.vmax);
            }
    }
    const auto& extra = ex.extra();
    rows.resize(size_t(n + extra.size()) * 256, -1);
    for (size_t i = 0; i < extra.size(); ++i)
        std::memcpy(rows.data() + (size_t(n) + i) * 256 + 0x80, extra[i].data(), 64 * sizeof(int32_t));
    return rows;
}

MinimalDfa minimize_dfa(int32_t m, const int32_t* trans, const int64_t* label, const uint8_t* block) {
    MinimalDfa out;
    // reachable from 0
    std::vector<uint8_t> keep(m, 0);
    std::vector<int32_t> stack{0};
    keep[0] = 1;
    while (!stack.empty()) {
        const int32_t s = stack.back();
        stack.pop_back();
        for (int b = 0; b < 256; ++b) {
            const int32_t t = trans[size_t(s) * 256 + b];
            if (t >= 0 && !keep[t]) keep[t] = 1, stack.push_back(t);
        }
    }
    // live: reaches an accepting state (through reachable states)
    std::vector<int64_t> roff(size_t(m) + 1, 0);
    for (int32_t s = 0; s < m; ++s)
        if (keep[s])
            for (int b = 0; b < 256; ++b) {
                const int32_t t = trans[size_t(s) * 256 + b];
                if (t >= 0) ++roff[size_t(t) + 1];
            }
    for (int32_t s = 0; s < m; ++s) roff[s + 1] += roff[s];
    std::vector<int32_t> rsrc(size_t(roff[m]));
    {
        std::vector<int64_t> fill(roff.begin(), roff.end() - 1);
        for (int32_t s = 0; s < m; ++s)
            if (keep[s])
                for (int b = 0; b < 256; ++b) {
                    const int32_t t = trans[size_t(s) * 256 + b];
                    if (t >= 0) rsrc[size_t(fill[t]++)] = s;
                }
    }
    std::vector<uint8_t> live(m, 0);
    for (int32_t s = 0; s < m; ++s)
        if (keep[s] && label[s] >= 0) live[s] = 1, stack.push_back(s);
    while (!stack.empty()) {
        const int32_t s = stack.back();
        stack.pop_back();
        for (int64_t e = roff[s]; e < roff[size_t(s) + 1]; ++e) {
            const int32_t p = rsrc[size_t(e)];
            if (!live[p]) live[p] = 1, stack.push_back(p);
        }
    }
    if (!live[0]) {
        out.n = 1;
        out.trans.assign(256, -1);
        out.label.assign(1, -1);
        return out;
    }
    // compact the kept states, in index order
    std::vector<int32_t> remap(m, -1), old;
    for (int32_t s = 0; s < m; ++s)
        if (live[s]) remap[s] = int32_t(old.size()), old.push_back(s);
    const int32_t k = int32_t(old.size());
    std::vector<int32_t> t(size_t(k) * 256);
    for (int32_t i = 0; i < k; ++i)
        for (int b = 0; b < 256; ++b) {
            const int32_t x = trans[size_t(old[i]) * 256 + b];
            t[size_t(i) * 256 + b] = x >= 0 ? remap[x] : -1;
        }
    // Moore refinement: a state's signature is its class and its successors' classes
    std::vector<int32_t> cls(k);
    auto classify = [&](auto&& key_of, size_t width) {
        std::unordered_map<uint64_t, std::vector<int32_t>> buckets;  // hash -> representative states
        std::vector<int32_t> next(k);
        std::vector<int32_t> key(width);
        std::vector<std::vector<int32_t>> keys;
        int32_t count = 0;
        for (int32_t s = 0; s < k; ++s) {
            key_of(s, key.data());
            auto& bucket = buckets[fnv1a(key.data(), key.size())];
            int32_t found = -1;
            for (int32_t c : bucket)
                if (keys[size_t(c)] == key) { found = c; break; }
            if (found < 0) {
                found = count++;
                keys.push_back(key);
                bucket.push_back(found);
            }
            next[s] = found;
        }
        cls.swap(next);
        return count;
    };
    int32_t count = classify(
        [&](int32_t s, int32_t* key) {
            const int32_t o = old[s];
            key[0] = int32_t(label[o]);
            key[1] = int32_t(label[o] >> 32);
            for (int b = 0; b < 256; ++b) key[2 + b] = block ? block[size_t(o) * 256 + b] : 0;
        },
        258);
    while (true) {
        const std::vector<int32_t> prev = cls;
        const int32_t c2 = classify(
            [&](int32_t s, int32_t* key) {
                key[0] = prev[s];
                for (int b = 0; b < 256; ++b) {
                    const int32_t x = t[size_t(s) * 256 + b];
                    key[1 + b] = x >= 0 ? prev[x] : -1;
                }
            },
            257);
        if (c2 == count) break;
        count = c2;
    }
    // canonical numbering: breadth-first from state 0's class, bytes in increasing order
    std::vector<int32_t> rep(count, -1);
    for (int32_t s = 0; s < k; ++s)
        if (rep[cls[s]] < 0) rep[cls[s]] = s;
    std::vector<int32_t> pos(count, -1), order;
    order.push_back(cls[0]);
    pos[cls[0]] = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        const int32_t r = rep[order[i]];
        for (int b = 0; b < 256; ++b) {
            const int32_t x = t[size_t(r) * 256 + b];
            if (x >= 0 && pos[cls[x]] < 0) pos[cls[x]] = int32_t(order.size()), order.push_back(cls[x]);
        }
    }
    out.n = int32_t(order.size());
    out.trans.assign(size_t(out.n) * 256, -1);
    out.label.resize(out.n);
    bool any_block = false;
    if (block) out.block.assign(size_t(out.n) * 256, 0);
    for (int32_t i = 0; i < out.n; ++i) {
        const int32_t r = rep[order[i]];
        for (int b = 0; b < 256; ++b) {
            const int32_t x = t[size_t(r) * 256 + b];
            out.trans[size_t(i) * 256 + b] = x >= 0 ? pos[cls[x]] : -1;
        }
        out.label[i] = label[old[r]];
        if (block)
            for (int b = 0; b < 256; ++b) {
                const uint8_t v = block[size_t(old[r]) * 256 + b];
                out.block[size_t(i) * 256 + b] = v;
                any_block |= v != 0;
            }
    }
    if (!any_block) out.block.clear();
    return out;
}

}  // namespace cad
