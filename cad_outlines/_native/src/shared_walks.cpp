#include "shared_walks.h"

#include <algorithm>

#include "hash.h"
#include "vocab_trie.h"

namespace cad {

SharedWalk walk_region(const VocabTrie& t, const RegionSig& sig, int32_t node) {
    SharedWalk out;
    std::vector<int32_t> group_of(size_t(sig.n), -1);
    std::vector<std::vector<std::pair<int32_t, int32_t>>> spans;
    auto record = [&](int32_t t0, int32_t t1, int32_t r) {
        if (t0 == t1) return;
        if (group_of[r] < 0) {
            group_of[r] = int32_t(out.grp_state.size());
            out.grp_state.push_back(r);
            spans.emplace_back();
        }
        auto& s = spans[size_t(group_of[r])];
        if (!s.empty() && s.back().second == t0)
            s.back().second = t1;
        else
            s.push_back({t0, t1});
    };
    std::vector<int32_t> at_depth(size_t(t.max_depth) + 1);
    const int32_t end = t.subtree_end[node];
    at_depth[size_t(t.depth[node])] = 0;
    record(t.tok_off[node], t.tok_off[node + 1], 0);
    if ((t.below[node] & ~sig.stays[0]) == 0) {  // the region stays as it is below: every token is state 0's
        record(t.tok_off[node + 1], t.tok_off[end], 0);
    } else {
        for (int32_t i = node + 1; i < end;) {
            const int32_t r = at_depth[size_t(t.depth[i] - 1)];
            const size_t rc = size_t(r) * 256 + t.byte[i];
            if (sig.exits[rc]) out.exits.push_back({i, r});
            const int32_t r2 = sig.trans[rc];
            ++out.nodes;
            if (r2 < 0) {
                i = t.subtree_end[i];
                continue;
            }
            at_depth[size_t(t.depth[i])] = r2;
            record(t.tok_off[i], t.tok_off[i + 1], r2);
            const int32_t stop = t.subtree_end[i];
            if (stop > i + 1 && (t.below[i] & ~sig.stays[r2]) == 0) {
                record(t.tok_off[i + 1], t.tok_off[stop], r2);
                i = stop;
                continue;
            }
            ++i;
        }
    }
    for (const auto& s : spans) {
        out.spans.insert(out.spans.end(), s.begin(), s.end());
        out.span_off.push_back(int32_t(out.spans.size()));
    }
    return out;
}

int32_t SharedWalks::region(const std::vector<int32_t>& key, int32_t n) {
    const uint64_t h = fnv1a(key.data(), key.size(), FNV_OFFSET ^ uint64_t(n));
    const size_t cost = sizeof(RegionSig) + 4 * key.size() + size_t(n) * (256 * 2 + 8);
    std::lock_guard<std::mutex> lk(mu_);
    const int32_t known = sig_index_.find(h, [&](int32_t v) { return sigs_[size_t(v)].key == key; });
    if (known >= 0) return known;
    if (region_bytes_ + cost > region_budget) return -1;
    const int32_t id = sig_index_.find_or_add(h, [](int32_t) { return false; }).first;
    region_bytes_ += cost;
    RegionSig& s = sigs_.emplace_back();
    s.n = n;
    s.key = key;
    s.trans.assign(size_t(n) * 256, -1);
    s.exits.assign(size_t(n) * 256, 0);
    s.stays.assign(size_t(n), 0);
    size_t at = 0;
    for (int32_t r = 0; r < n; ++r) {
        const int32_t runs = key[at++];
        for (int32_t j = 0; j < runs; ++j, at += 2) {
            const int32_t end = j + 1 < runs ? key[at + 2] : 256;
            const int32_t v = key[at + 1];
            for (int32_t c = key[at]; c < end; ++c) {
                s.trans[size_t(r) * 256 + size_t(c)] = int8_t(v >= 0 ? v >> 1 : -1);
                s.exits[size_t(r) * 256 + size_t(c)] = uint8_t(v & 1);
            }
        }
        uint64_t moves = 0;  // the classes all of whose bytes keep state r, with no exit
        for (int c = 0; c < 256; ++c)
            if (s.exits[size_t(r) * 256 + c] || s.trans[size_t(r) * 256 + c] != r) moves |= byte_class(uint8_t(c));
        s.stays[r] = ~moves;
    }
    return id;
}

const RegionSig& SharedWalks::sig(int32_t id) const {
    std::lock_guard<std::mutex> lk(mu_);
    return sigs_[size_t(id)];
}

static uint64_t walk_key(int32_t sig, int32_t node) { return uint64_t(uint32_t(sig)) << 32 | uint32_t(node); }

std::shared_ptr<const SharedWalk> SharedWalks::find(int32_t sig, int32_t node) const {
    std::lock_guard<std::mutex> lk(mu_);
    const int32_t at = walk_at_.find(walk_key(sig, node));
    if (at < 0) return nullptr;
    ++n_found;
    return walks_[size_t(at)];
}

std::pair<std::shared_ptr<const SharedWalk>, bool> SharedWalks::walk(const VocabTrie& t, int32_t sig, int32_t node) {
    if (auto got = find(sig, node)) return {got, false};
    auto made = std::make_shared<const SharedWalk>(walk_region(t, this->sig(sig), node));
    ++n_made;
    std::lock_guard<std::mutex> lk(mu_);
    if (made->bytes() > budget) return {made, true};  // used, not kept
    if (bytes_ + made->bytes() > budget) {  // full: a new generation (walks in use stay alive in their users)
        walk_at_.clear();
        walks_.clear();
        bytes_ = 0;
        ++n_flushes;
    }
    auto [at, fresh] = walk_at_.try_emplace(walk_key(sig, node), int32_t(walks_.size()));
    if (fresh) {
        walks_.push_back(made);
        bytes_ += made->bytes();
    }
    return {walks_[size_t(at)], true};
}

void SharedWalks::set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }

void SharedWalks::clear() {
    std::lock_guard<std::mutex> lk(mu_);
    walk_at_.clear();
    walks_.clear();
    bytes_ = 0;
    n_made = n_found = n_flushes = 0;
}

size_t SharedWalks::n_walks() const {
    std::lock_guard<std::mutex> lk(mu_);
    return walks_.size();
}

size_t SharedWalks::n_bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_;
}

size_t SharedWalks::n_regions() const {
    std::lock_guard<std::mutex> lk(mu_);
    return sigs_.size();
}

size_t SharedWalks::n_region_bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return region_bytes_;
}

}  // namespace cad
