// Walks of the vocabulary trie inside one lexeme, shared by every grammar of a vocabulary.
//
// Most of a lazy row build is the walk of the tokens from one hypothesis inside a lexeme (a JSON
// string's body, a number's digits; constraint runs of other terminals beside it are part of its
// configurations): the trie is walked through the byte automaton's edges that keep that lexeme
// going (no label). What such a walk finds depends only on the configurations those edges reach
// from there (its *region*: the lexeme going on, and at which bytes the grammar has other edges,
// its exits), not on the rest of the grammar, and the same terminals (JSON strings, numbers)
// recur in every JSON Schema. So the region is written in a canonical form (RegionSig: its
// states numbered breadth first from the hypothesis, byte by byte) and the walk of a trie subtree
// from it is kept per vocabulary, keyed by (region, subtree), in local state numbers: a grammar
// with the same region maps the local states back to its own and walks on from the exits itself
// (where the lexeme ends, what follows is the grammar's own).
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "flat_map.h"

namespace cad {

struct VocabTrie;

// A region in canonical form: local states 0 .. n-1 (0 the hypothesis, the others numbered in
// the order a breadth-first search over bytes 0 .. 255 meets them).
struct RegionSig {
    int32_t n = 0;
    std::vector<int32_t> key;     // as SharedWalks::region is given it
    std::vector<int8_t> trans;    // n * 256: the lexeme's next local state (-1: it cannot go on; n <= 127)
    std::vector<uint8_t> exits;   // n * 256: the grammar has other edges at this byte (it goes on from there)
    std::vector<uint64_t> stays;  // n: byte_class bits on all of whose bytes the state stays, no exit
};

// The walk of trie subtree `node` from local state 0 of a region (the state after the node's
// byte): the tokens ending in each local state, and the nodes at its exits.
struct SharedWalk {
    std::vector<int32_t> grp_state, span_off{0};     // groups: local end state, their spans (CSR)
    std::vector<std::pair<int32_t, int32_t>> spans;  // token ranges of the trie's tok_ids
    std::vector<std::pair<int32_t, int32_t>> exits;  // (node, local state at its parent), nodes ascending
    size_t nodes = 0;                                // trie nodes walked to make it
    size_t bytes() const {
        return sizeof(SharedWalk) + 4 * (grp_state.size() + span_off.size()) + 8 * (spans.size() + exits.size());
    }
};

// The walk of subtree `node` from local state 0 of `sig`.
SharedWalk walk_region(const VocabTrie& trie, const RegionSig& sig, int32_t node);

// The regions and walks of one vocabulary (held by its VocabTrie), shared by threads.
class SharedWalks {
public:
    // The id of the region of `n` states written as `key`: per local state, its count of runs
    // of bytes, then per run its first byte and 2 * next local state (-1: none) + exit; -1 when
    // a new region would take the kept regions past `region_budget` bytes (not shared then).
    int32_t region(const std::vector<int32_t>& key, int32_t n);
    const RegionSig& sig(int32_t id) const;
    // The walk of subtree `node` from region `sig`'s first state: kept, or made (second: true)
    // and kept; a walk that would take the kept ones past `budget` bytes first forgets them all
    // (a new generation: what grammars use now is kept again as they meet it).
    std::pair<std::shared_ptr<const SharedWalk>, bool> walk(const VocabTrie& trie, int32_t sig, int32_t node);
    // The walk of subtree `node` from region `sig`, if kept.
    std::shared_ptr<const SharedWalk> find(int32_t sig, int32_t node) const;
    void set_enabled(bool on);
    bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
    void clear();
    size_t n_walks() const;
    size_t n_bytes() const;
    size_t n_regions() const;
    size_t n_region_bytes() const;
    std::atomic<size_t> budget{size_t(64) << 20};  // bytes of kept walks
    // bytes of kept regions (never forgotten: grammars hold their ids; ~0.5 KB a state)
    std::atomic<size_t> region_budget{size_t(16) << 20};
    // walks made, found; times the kept ones were forgotten when full
    mutable std::atomic<size_t> n_made{0}, n_found{0}, n_flushes{0};

private:
    mutable std::mutex mu_;
    std::deque<RegionSig> sigs_;
    InternIndex sig_index_;
    FlatMap walk_at_;                                       // sig << 32 | node -> walks_ index
    std::vector<std::shared_ptr<const SharedWalk>> walks_;  // the kept walks
    size_t bytes_ = 0, region_bytes_ = 0;
    std::atomic<bool> enabled_{true};
};

}  // namespace cad
