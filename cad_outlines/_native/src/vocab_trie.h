// The vocabulary as a byte trie in preorder: a subtree is a contiguous node range, so a
// walk over every token with a given first byte is one linear scan that skips dead
// subtrees (llguidance's TokTrie idea). Built once per vocabulary and shared by its lazy
// grammars.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shared_walks.h"


namespace cad {

struct VocabTrie {
    // node i (preorder): byte, depth (1 = a token's first byte), end of its subtree, and
    // the tokens whose bytes end exactly here (CSR tok_off / tok_ids)
    std::vector<uint8_t> byte;
    std::vector<int32_t> depth, subtree_end, tok_off, tok_ids;
    int32_t first_child[256];  // node of each first byte (-1: no token starts with it)
    int32_t max_depth = 0;
    int32_t max_len_from[256] = {};  // the longest token starting with each byte (0: none), in bytes
    // per node, the classes (byte_class bits) of the bytes strictly below it: a walk whose
    // hypotheses stay as they are on all of them takes the subtree whole
    std::vector<uint64_t> below;
    // per node, where its path ends a character and every token strictly below it goes on with
    // whole *plain* characters (UTF-8, none below U+0020, no '"' or '\\': what a JSON string holds
    // unescaped), the most characters a token goes on with; else -1. A walk whose hypotheses can each
    // take that many plain characters whatever they are takes the subtree whole (LazyStore::plain_whole)
    std::vector<int32_t> plain_chars_below;

    // Every token that is not special (bit clear in `allowed`) and not empty; token t's
    // bytes are bytes[off[t] .. off[t + 1]).
    VocabTrie(const int64_t* off, const uint8_t* bytes, const uint32_t* allowed, int32_t vocab_size);
    int32_t vocab_size = 0;
private:
    // plain_chars_below, from the nodes where tokens end ((node, token) pairs)
    void plain_below_(int32_t n_nodes, const std::vector<std::pair<int32_t, int32_t>>& tok_at);
public:
    size_t n_tokens() const { return tok_ids.size(); }
    size_t size() const { return byte.size(); }
    // walks inside lexemes, shared by every grammar of the vocabulary (shared_walks.h)
    std::unique_ptr<SharedWalks> shared = std::make_unique<SharedWalks>();
};

// The bytes in 46 classes: each ASCII byte that is no letter or digit alone (the controls
// but tab, line feed and carriage return together), letters and digits in ranges that
// lexemes tell apart (hexadecimal, binary, octal), UTF-8 continuation and lead bytes.
uint64_t byte_class(uint8_t b);

}  // namespace cad
