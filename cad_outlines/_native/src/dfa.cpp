// See dfa.h.
#include "dfa.h"
#include "flat_map.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "hash.h"

namespace cad {

namespace {

constexpr int32_t MIXED = -2;

// Dense ids, in order of first appearance, for rows of int32s (of any length): rows stored
// flat, open addressing over their hashes.
class RowInterner {
public:
    int32_t intern(const int32_t* row, size_t len) {
        if (2 * (size() + 1) > ids_.size()) grow();
        const uint64_t h = hash(row, len);
        for (size_t i = slot(h);; i = (i + 1) & mask_) {
            const int32_t id = ids_[i];
            if (id < 0) {
                ids_[i] = int32_t(size());
                hashes_[i] = h;
                rows_.insert(rows_.end(), row, row + len);
                off_.push_back(rows_.size());
                return ids_[i];
            }
            if (hashes_[i] == h && off_[id + 1] - off_[id] == len &&
                std::memcmp(rows_.data() + off_[id], row, len * sizeof(int32_t)) == 0)
                return id;
        }
    }
    void clear() {
        if (size()) ids_.assign(ids_.size(), -1);
        rows_.clear();
        off_.resize(1);
    }
    size_t size() const { return off_.size() - 1; }

private:
    // a sum of independent products (vectorises, unlike a chained hash); rows are compared
    // in full after it
    static uint64_t hash(const int32_t* row, size_t len) {
        uint64_t h = len;
        for (size_t c = 0; c < len; ++c) h += uint64_t(uint32_t(row[c])) * (0x9E3779B97F4A7C15ull + 2 * c);
        return h ^ (h >> 29);
    }
    size_t slot(uint64_t h) const { return size_t((h * 0x9E3779B97F4A7C15ull) >> shift_); }
    void grow() {
        const size_t cap = ids_.empty() ? 64 : 2 * ids_.size();
        std::vector<uint64_t> hashes = std::move(hashes_);
        std::vector<int32_t> ids = std::move(ids_);
        hashes_.assign(cap, 0);
        ids_.assign(cap, -1);
        mask_ = cap - 1;
        shift_ = 64 - __builtin_ctzll(cap);
        for (size_t j = 0; j < ids.size(); ++j)
            if (ids[j] >= 0) {
                size_t i = slot(hashes[j]);
                while (ids_[i] >= 0) i = (i + 1) & mask_;
                ids_[i] = ids[j];
                hashes_[i] = hashes[j];
            }
    }

    std::vector<int32_t> rows_, ids_;  // ids_: -1 empty slot
    std::vector<size_t> off_{0};
    std::vector<uint64_t> hashes_;
    size_t mask_ = 0;
    int shift_ = 64;
};

// A DFA's non-dead transitions, per state in increasing byte order (CSR).
struct Edges {
    std::vector<size_t> off{0};
    std::vector<uint8_t> byte;
    std::vector<int32_t> to;
    void add(int b, int32_t t) { byte.push_back(uint8_t(b)), to.push_back(t); }
    void end_state() { off.push_back(to.size()); }
};

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

// Hopcroft's refinement of `cls` (k states, classes 0..count-1) to the coarsest partition in
// which the states of a class go, per byte class, to one class (or all to no state): the
// classes Moore's rounds reach, in O(nc n log n) rather than a round per step of the longest
// chain (a string of up to n characters takes n rounds). `sig`: per state, its (byte class,
// target) edges. A dead edge goes to a sink state of its own. Returns the number of classes;
// cls[i] is renumbered densely.
static int32_t hopcroft(int32_t k, size_t nc, const Edges& sig, std::vector<int32_t>& cls, int32_t count) {
    const int32_t n = k + 1, sink = k;
    std::vector<int32_t> tgt(size_t(n) * nc, sink);
    for (int32_t i = 0; i < k; ++i)
        for (size_t e = sig.off[i]; e < sig.off[i + 1]; ++e) tgt[size_t(i) * nc + sig.byte[e]] = sig.to[e];
    // predecessors per (byte class, target): CSR over c * n + t
    std::vector<int32_t> ioff(nc * size_t(n) + 1, 0), isrc(size_t(n) * nc);
    for (int32_t s = 0; s < n; ++s)
        for (size_t c = 0; c < nc; ++c) ++ioff[c * size_t(n) + size_t(tgt[size_t(s) * nc + c]) + 1];
    for (size_t x = 0; x + 1 < ioff.size(); ++x) ioff[x + 1] += ioff[x];
    {
        std::vector<int32_t> fill(ioff.begin(), ioff.end() - 1);
        for (int32_t s = 0; s < n; ++s)
            for (size_t c = 0; c < nc; ++c) isrc[size_t(fill[c * size_t(n) + size_t(tgt[size_t(s) * nc + c])]++)] = s;
    }
    // the partition: each block a range of elems; the sink starts in a block of its own
    std::vector<int32_t> blk(n), elems(n), loc(n), start, end, marked;
    for (int32_t i = 0; i < k; ++i) blk[i] = cls[i];
    blk[sink] = count;
    const int32_t n0 = count + 1;
    start.assign(n0 + 1, 0);
    for (int32_t s = 0; s < n; ++s) ++start[blk[s] + 1];
    for (int32_t b = 0; b < n0; ++b) start[b + 1] += start[b];
    end.assign(start.begin() + 1, start.end());
    start.pop_back();
    {
        std::vector<int32_t> fill(start);
        for (int32_t s = 0; s < n; ++s) loc[s] = fill[blk[s]]++, elems[loc[s]] = s;
    }
    marked.assign(n0, 0);
    std::vector<int32_t> work, splitter, touched;
    std::vector<uint8_t> in_work(n0, 1);
    for (int32_t b = 0; b < n0; ++b) work.push_back(b);
    while (!work.empty()) {
        const int32_t B = work.back();
        work.pop_back();
        in_work[B] = 0;
        splitter.assign(elems.begin() + start[B], elems.begin() + end[B]);
        for (size_t c = 0; c < nc; ++c) {
            touched.clear();
            for (int32_t t : splitter)
                for (int32_t x = ioff[c * size_t(n) + size_t(t)]; x < ioff[c * size_t(n) + size_t(t) + 1]; ++x) {
                    const int32_t s = isrc[size_t(x)], b = blk[s];
                    if (marked[b] == 0) touched.push_back(b);
                    const int32_t p = start[b] + marked[b]++;  // s to the marked front of its block
                    const int32_t other = elems[p];
                    elems[p] = s, elems[loc[s]] = other;
                    loc[other] = loc[s], loc[s] = p;
                }
            for (int32_t b : touched) {
                const int32_t m = marked[b];
                marked[b] = 0;
                if (m == end[b] - start[b]) continue;  // all of it: no split
                const int32_t nb = int32_t(start.size());
                if (m <= end[b] - start[b] - m) {  // the marked part is the new block
                    start.push_back(start[b]), end.push_back(start[b] + m);
                    start[b] += m;
                } else {
                    start.push_back(start[b] + m), end.push_back(end[b]);
                    end[b] = start[b] + m;
                }
                marked.push_back(0);
                for (int32_t p = start[nb]; p < end[nb]; ++p) blk[elems[p]] = nb;
                if (in_work[b]) {
                    work.push_back(nb), in_work.push_back(1);
                } else {
                    const bool smaller_new = end[nb] - start[nb] <= end[b] - start[b];
                    work.push_back(smaller_new ? nb : b);
                    in_work.push_back(smaller_new ? 1 : 0);
                    if (!smaller_new) in_work[b] = 1;
                }
            }
        }
    }
    // dense class ids for the kept states, in order of first appearance (the sink is alone)
    std::vector<int32_t> dense(start.size(), -1);
    int32_t out = 0;
    for (int32_t i = 0; i < k; ++i) {
        if (dense[blk[i]] < 0) dense[blk[i]] = out++;
        cls[i] = dense[blk[i]];
    }
    return out;
}

MinimalDfa minimize_dfa(int32_t m, const int32_t* trans, const int64_t* label, const uint8_t* block) {
    MinimalDfa out;
    // reachable states, breadth-first from 0, with their edges (targets as reachable indices)
    std::vector<int32_t> idx(m, -1), reach{0};
    idx[0] = 0;
    Edges all;
    for (size_t r = 0; r < reach.size(); ++r) {
        const int32_t* row = trans + size_t(reach[r]) * 256;
        for (int b = 0; b < 256; ++b)
            if (row[b] >= 0) {
                if (idx[row[b]] < 0) idx[row[b]] = int32_t(reach.size()), reach.push_back(row[b]);
                all.add(b, idx[row[b]]);
            }
        all.end_state();
    }
    const int32_t nr = int32_t(reach.size());
    // live: reaches an accepting state
    std::vector<size_t> roff(size_t(nr) + 1, 0);
    for (int32_t t : all.to) ++roff[size_t(t) + 1];
    for (int32_t r = 0; r < nr; ++r) roff[r + 1] += roff[r];
    std::vector<int32_t> rsrc(all.to.size());
    {
        std::vector<size_t> fill(roff.begin(), roff.end() - 1);
        for (int32_t r = 0; r < nr; ++r)
            for (size_t e = all.off[r]; e < all.off[r + 1]; ++e) rsrc[fill[all.to[e]]++] = r;
    }
    std::vector<uint8_t> live(nr, 0);
    std::vector<int32_t> stack;
    for (int32_t r = 0; r < nr; ++r)
        if (label[reach[r]] >= 0) live[r] = 1, stack.push_back(r);
    while (!stack.empty()) {
        const int32_t r = stack.back();
        stack.pop_back();
        for (size_t e = roff[r]; e < roff[size_t(r) + 1]; ++e)
            if (!live[rsrc[e]]) live[rsrc[e]] = 1, stack.push_back(rsrc[e]);
    }
    if (!live[0]) {
        out.n = 1;
        out.trans.assign(256, -1);
        out.label.assign(1, -1);
        return out;
    }
    // the kept (reachable and live) states 0..k-1, their edges to kept states
    std::vector<int32_t> keep_of(nr, -1), old;
    for (int32_t r = 0; r < nr; ++r)
        if (live[r]) keep_of[r] = int32_t(old.size()), old.push_back(reach[r]);
    const int32_t k = int32_t(old.size());
    Edges ed;
    for (int32_t r = 0; r < nr; ++r) {
        if (!live[r]) continue;
        for (size_t e = all.off[r]; e < all.off[r + 1]; ++e)
            if (live[all.to[e]]) ed.add(all.byte[e], keep_of[all.to[e]]);
        ed.end_state();
    }
    bool blocks = false;
    if (block)
        for (int32_t i = 0; i < k && !blocks; ++i)
            for (int b = 0; b < 256 && !blocks; ++b) blocks = block[size_t(old[i]) * 256 + b] != 0;
    auto blk = [&](int32_t i, int b) { return blocks ? int32_t(block[size_t(old[i]) * 256 + b]) : 0; };
    // byte classes: bytes whose columns (transitions and block) agree on every kept state
    std::array<size_t, 257> coff{};
    for (uint8_t b : ed.byte) ++coff[size_t(b) + 1];
    for (int b = 0; b < 256; ++b) coff[b + 1] += coff[b];
    std::vector<int32_t> cstate(ed.to.size()), cto(ed.to.size());
    {
        std::array<size_t, 256> fill;
        std::copy(coff.begin(), coff.end() - 1, fill.begin());
        for (int32_t i = 0; i < k; ++i)
            for (size_t e = ed.off[i]; e < ed.off[i + 1]; ++e) {
                const size_t f = fill[ed.byte[e]]++;
                cstate[f] = i, cto[f] = ed.to[e];
            }
    }
    auto same_column = [&](int a, int b) {
        const size_t n = coff[a + 1] - coff[a];
        if (n != coff[b + 1] - coff[b] ||
            !std::equal(cstate.begin() + coff[a], cstate.begin() + coff[a] + n, cstate.begin() + coff[b]) ||
            !std::equal(cto.begin() + coff[a], cto.begin() + coff[a] + n, cto.begin() + coff[b]))
            return false;
        for (int32_t i = 0; i < k && blocks; ++i)
            if (blk(i, a) != blk(i, b)) return false;
        return true;
    };
    std::array<int, 256> byte_class;
    std::vector<int> rep_byte;
    for (int b = 0; b < 256; ++b) {
        byte_class[b] = -1;
        for (size_t c = 0; c < rep_byte.size() && byte_class[b] < 0; ++c)
            if (same_column(rep_byte[c], b)) byte_class[b] = int(c);
        if (byte_class[b] < 0) byte_class[b] = int(rep_byte.size()), rep_byte.push_back(b);
    }
    const size_t nc = rep_byte.size();
    // Moore refinement: first by label and block row, then by class and the successors'
    // classes (per byte class; dead successors left out)
    std::vector<int32_t> cls(k), key;
    RowInterner classes;
    for (int32_t i = 0; i < k; ++i) {
        key.assign({int32_t(label[old[i]]), int32_t(label[old[i]] >> 32)});
        if (blocks)
            for (size_t c = 0; c < nc; ++c) key.push_back(blk(i, rep_byte[c]));
        cls[i] = classes.intern(key.data(), key.size());
    }
    Edges sig;  // per state, (byte class, target) for the classes' representative bytes
    for (int32_t i = 0; i < k; ++i) {
        for (size_t e = ed.off[i]; e < ed.off[i + 1]; ++e)
            if (rep_byte[byte_class[ed.byte[e]]] == ed.byte[e]) sig.add(byte_class[ed.byte[e]], ed.to[e]);
        sig.end_state();
    }
    int32_t count = hopcroft(k, nc, sig, cls, int32_t(classes.size()));
    // canonical numbering: breadth-first from state 0's class, bytes in increasing order
    std::vector<int32_t> rep(count, -1);
    for (int32_t i = 0; i < k; ++i)
        if (rep[cls[i]] < 0) rep[cls[i]] = i;
    std::vector<int32_t> pos(count, -1), order{cls[0]};
    pos[cls[0]] = 0;
    for (size_t j = 0; j < order.size(); ++j) {
        const int32_t r = rep[order[j]];
        for (size_t e = ed.off[r]; e < ed.off[r + 1]; ++e) {
            const int32_t c = cls[ed.to[e]];
            if (pos[c] < 0) pos[c] = int32_t(order.size()), order.push_back(c);
        }
    }
    out.n = int32_t(order.size());
    out.trans.assign(size_t(out.n) * 256, -1);
    out.label.resize(out.n);
    if (blocks) out.block.assign(size_t(out.n) * 256, 0);
    for (int32_t j = 0; j < out.n; ++j) {
        const int32_t r = rep[order[j]];
        for (size_t e = ed.off[r]; e < ed.off[r + 1]; ++e) out.trans[size_t(j) * 256 + ed.byte[e]] = pos[cls[ed.to[e]]];
        out.label[j] = label[old[r]];
        if (blocks) std::memcpy(out.block.data() + size_t(j) * 256, block + size_t(old[r]) * 256, 256);
    }
    return out;
}

MinimalDfa unless_product(int32_t n, const int32_t* trans, const uint8_t* accept, const uint8_t* block,
                          const std::vector<const int32_t*>& str_trans, const std::vector<const uint8_t*>& str_accept) {
    // product states (regex state, each string's state or -1) with some string alive come
    // first, from the start (0, 0, ...); a byte that kills every string run leads to the
    // regex DFA's own state r, numbered P + r once the P product states are known
    const size_t k = str_trans.size(), w = k + 1;
    RowInterner ids;
    std::vector<int32_t> key(w, 0), tuples, rows;  // rows: product transitions, >= 0 product, < -1: -2 - r
    ids.intern(key.data(), w);
    tuples.assign(key.begin(), key.end());
    for (size_t p = 0; p < ids.size(); ++p) {
        const int32_t r = tuples[p * w];
        rows.resize((p + 1) * 256);
        int32_t* row = rows.data() + p * 256;
        for (int b = 0; b < 256; ++b) {
            const int32_t x = trans[size_t(r) * 256 + b];
            row[b] = x >= 0 ? -2 - x : -1;
            if (x < 0) continue;
            bool alive = false;
            key[0] = x;
            for (size_t q = 0; q < k; ++q) {
                const int32_t s = tuples[p * w + 1 + q];
                key[1 + q] = s >= 0 ? str_trans[q][size_t(s) * 256 + b] : -1;
                alive |= key[1 + q] >= 0;
            }
            if (!alive) continue;
            const size_t before = ids.size();
            row[b] = ids.intern(key.data(), w);
            if (ids.size() > before) tuples.insert(tuples.end(), key.begin(), key.end());
        }
    }
    const size_t np = ids.size(), m = np + size_t(n);
    std::vector<int32_t> t(m * 256);
    std::vector<int64_t> label(m);
    std::vector<uint8_t> blk(block ? m * 256 : 0);
    for (size_t p = 0; p < np; ++p) {
        for (int b = 0; b < 256; ++b) {
            const int32_t x = rows[p * 256 + b];
            t[p * 256 + b] = x < -1 ? int32_t(np) + (-2 - x) : x;
        }
        const int32_t r = tuples[p * w];
        label[p] = -1;
        if (accept[r]) {
            label[p] = 0;
            for (size_t q = 0; q < k; ++q) {
                const int32_t s = tuples[p * w + 1 + q];
                if (s >= 0 && str_accept[q][s]) {
                    label[p] = int64_t(1 + q);
                    break;
                }
            }
        }
        if (block) std::memcpy(blk.data() + p * 256, block + size_t(r) * 256, 256);
    }
    for (int32_t r = 0; r < n; ++r) {
        for (int b = 0; b < 256; ++b) {
            const int32_t x = trans[size_t(r) * 256 + b];
            t[(np + r) * 256 + b] = x >= 0 ? int32_t(np) + x : -1;
        }
        label[np + r] = accept[r] ? 0 : -1;
    }
    if (block) std::memcpy(blk.data() + np * 256, block, size_t(n) * 256);
    return minimize_dfa(int32_t(m), t.data(), label.data(), block ? blk.data() : nullptr);
}

TerminalTables terminal_tables(int32_t n, const int32_t* trans, const int32_t* label, const uint8_t* block) {
    TerminalTables out;
    std::vector<int32_t> shadowed;
    for (int32_t s = 0; s < n && block; ++s)
        if (label[s] >= 0 && std::any_of(block + size_t(s) * 256, block + size_t(s + 1) * 256, [](uint8_t v) { return v; }))
            shadowed.push_back(s);
    const int32_t m = n + int32_t(shadowed.size());
    const size_t total = size_t(m) + 1;
    out.m = m;
    out.trans.resize(total * 256);
    for (size_t i = 0; i < size_t(n) * 256; ++i) out.trans[i] = trans[i] < 0 ? m : trans[i];
    for (size_t j = 0; j < shadowed.size(); ++j)
        std::copy_n(out.trans.data() + size_t(shadowed[j]) * 256, 256, out.trans.data() + (size_t(n) + j) * 256);
    std::fill_n(out.trans.data() + size_t(m) * 256, 256, m);
    out.label.assign(total, -1);
    std::copy_n(label, n, out.label.begin());
    out.block.assign(total * 256, 0);
    out.blocked.assign(total, 0);
    out.shadow.resize(total);
    for (size_t s = 0; s < total; ++s) out.shadow[s] = int32_t(s);
    for (size_t j = 0; j < shadowed.size(); ++j) out.shadow[shadowed[j]] = n + int32_t(j);
    if (block) {
        std::copy_n(block, size_t(n) * 256, out.block.begin());
        for (int32_t s = 0; s < n; ++s)
            out.blocked[s] = std::any_of(block + size_t(s) * 256, block + size_t(s + 1) * 256, [](uint8_t v) { return v; });
    }
    // live: backwards from the accepting states over the edges of states 0..m-1
    // (edges into the dead state m are left out: it reaches nothing; most of a row goes there)
    std::vector<int64_t> roff(total + 1, 0);
    for (size_t i = 0; i < size_t(m) * 256; ++i)
        if (out.trans[i] != m) ++roff[size_t(out.trans[i]) + 1];  // (one counter for every dead edge: a chain)
    for (size_t s = 0; s < total; ++s) roff[s + 1] += roff[s];
    std::vector<int32_t> pred(size_t(roff[total]));
    {
        std::vector<int64_t> fill(roff.begin(), roff.end() - 1);
        for (int32_t s = 0; s < m; ++s) {
            const int32_t* row = out.trans.data() + size_t(s) * 256;
            for (int b = 0; b < 256; ++b)
                if (row[b] != m) pred[size_t(fill[row[b]]++)] = s;
        }
    }
    out.live.assign(total, 0);
    std::vector<int32_t> todo;  // states that reach an accepting state in zero or more steps
    for (int32_t s = 0; s < m; ++s)
        if (out.label[s] >= 0) todo.push_back(s);
    while (!todo.empty()) {
        const int32_t t = todo.back();
        todo.pop_back();
        for (int64_t e = roff[t]; e < roff[size_t(t) + 1]; ++e) {
            const int32_t p = pred[size_t(e)];
            if (out.live[p]) continue;
            out.live[p] = 1;
            if (out.label[p] < 0) todo.push_back(p);
        }
    }
    return out;
}

std::pair<int32_t, int64_t> pair_outcomes(int32_t na, const int32_t* ta, const uint8_t* aa, int32_t nb,
                                          const int32_t* tb, const uint8_t* ab, int64_t max_pairs) {
    // a pair as one key: each state shifted by one so that dead (-1) is 0
    auto key = [](int32_t x, int32_t y) { return (uint64_t(uint32_t(x + 1)) << 32) | uint32_t(y + 1); };
    FlatMap ids;
    std::vector<std::pair<int32_t, int32_t>> pairs{{0, 0}};
    ids.try_emplace(key(0, 0), 0);
    int32_t outcomes = 0;
    for (size_t i = 0; i < pairs.size() && outcomes != 7; ++i) {
        const auto [x, y] = pairs[i];
        const bool acc_x = x >= 0 && aa[x], acc_y = y >= 0 && ab[y];
        outcomes |= (acc_x && !acc_y ? 1 : 0) | (acc_y && !acc_x ? 2 : 0) | (acc_x && acc_y ? 4 : 0);
        const int32_t* rx = x >= 0 ? ta + size_t(x) * 256 : nullptr;
        const int32_t* ry = y >= 0 ? tb + size_t(y) * 256 : nullptr;
        for (int c = 0; c < 256; ++c) {
            const int32_t p = rx ? rx[c] : -1, q = ry ? ry[c] : -1;
            if (p < 0 && q < 0) continue;
            if (p >= na || q >= nb) return {outcomes, -2};  // only the targets the walk reads are checked
            if (ids.try_emplace(key(p, q), int32_t(pairs.size())).second) {
                if (int64_t(pairs.size()) >= max_pairs) return {outcomes, -1};
                pairs.push_back({p, q});
            }
        }
    }
    return {outcomes, int64_t(pairs.size())};
}

}  // namespace cad
