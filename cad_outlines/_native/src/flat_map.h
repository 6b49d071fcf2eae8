// A map from 64-bit keys to non-negative ints in one open-addressed array (linear probing,
// at most half full): the lazy store's hot lookups (label sequences, groups, rows), where
// std::unordered_map's node per entry costs more than the work around it; and InternIndex,
// the native core's one way of numbering distinct contents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cad {

class FlatMap {
public:
    // The value at `key`, `value` inserted there if absent; second: whether it was inserted.
    std::pair<int32_t, bool> try_emplace(uint64_t key, int32_t value) {
        if (2 * (n_ + 1) > vals_.size()) grow();
        size_t i = slot(key);
        for (; vals_[i] >= 0; i = (i + 1) & mask_)
            if (keys_[i] == key) return {vals_[i], false};
        keys_[i] = key;
        vals_[i] = value;
        ++n_;
        return {value, true};
    }
    // The value at `key`, -1 if absent.
    int32_t find(uint64_t key) const {
        if (n_ == 0) return -1;
        for (size_t i = slot(key); vals_[i] >= 0; i = (i + 1) & mask_)
            if (keys_[i] == key) return vals_[i];
        return -1;
    }
    // Empty, in time proportional to what it held: a map much larger than its last contents
    // (reused after a large job) is given back.
    void clear() {
        if (vals_.size() > 1024 && n_ * 16 < vals_.size()) {
            keys_ = {};
            vals_ = {};
            mask_ = 0, shift_ = 64;
        } else if (n_) {
            vals_.assign(vals_.size(), -1);
        }
        n_ = 0;
    }
    size_t size() const { return n_; }

private:
    size_t slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
    void grow() {
        std::vector<uint64_t> keys = std::move(keys_);
        std::vector<int32_t> vals = std::move(vals_);
        const size_t cap = vals.empty() ? 64 : 2 * vals.size();
        keys_.assign(cap, 0);
        vals_.assign(cap, -1);
        mask_ = cap - 1;
        shift_ = 64 - __builtin_ctzll(cap);
        n_ = 0;
        for (size_t i = 0; i < vals.size(); ++i)
            if (vals[i] >= 0) try_emplace(keys[i], vals[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<int32_t> vals_;  // -1: empty slot
    size_t n_ = 0, mask_ = 0;
    int shift_ = 64;
};

// Interning by content hash: entries are numbered 0, 1, ... in the order they are added, the
// caller keeps their contents; entries whose hashes collide are chained, and a lookup asks
// `same(v)` of each entry v with the hash (equal contents are always compared: the hash
// only spreads the buckets).
class InternIndex {
public:
    // (v, false) for the entry v with same(v), else (size(), true): the new entry's id, now
    // recorded under `hash` (the caller stores its contents).
    template <class Same>
    std::pair<int32_t, bool> find_or_add(uint64_t hash, Same&& same) {
        const int32_t id = int32_t(next_.size());
        auto [head, fresh] = heads_.try_emplace(hash, id);
        if (fresh) {
            next_.push_back(-1);
            return {id, true};
        }
        for (int32_t v = head; v >= 0; v = next_[v])
            if (same(v)) return {v, false};
        next_.push_back(next_[head]);  // chained after the head
        next_[head] = id;
        return {id, true};
    }
    // The entry v with same(v), -1 if none.
    template <class Same>
    int32_t find(uint64_t hash, Same&& same) const {
        for (int32_t v = heads_.find(hash); v >= 0; v = next_[v])
            if (same(v)) return v;
        return -1;
    }
    size_t size() const { return next_.size(); }
    void clear() {
        heads_.clear();
        next_.clear();
    }

private:
    FlatMap heads_;              // hash -> the first entry with it
    std::vector<int32_t> next_;  // per entry: the next one with its hash (-1: none)
};

}  // namespace cad
