#include "lazy_store.h"

#include <algorithm>
#include <map>

#include "lexer.h"

namespace cad {

// edge kinds of the byte automaton (engine/lexer_index.py)
constexpr uint8_t NL_GOES_ON = 1, NL_STARTS = 2;

static int32_t indent_step(int32_t acc, int b, int32_t tab) {
    if (b == 10) return 0;
    if (acc < 0) return acc;
    return b == 32 ? acc + 1 : b == 9 ? acc + tab : acc;
}

LazyStore::LazyStore(Grammar& g, ByteAutomatonView a, std::shared_ptr<const VocabTrie> trie)
    : g_(g), a_(a), trie_(std::move(trie)) {
    emitted_.push_back({-1, -1});
    root_.assign(g.n_configs(), -1);
    uncond_.assign(g.n_configs(), -1);
    edge_off_.push_back(0);
    row_off_.push_back(0);
    refresh_views();
}

int32_t LazyStore::extend(int32_t eid, int32_t label) {
    uint64_t key = (uint64_t(uint32_t(eid)) << 32) | uint32_t(label);
    auto it = emit_id_.find(key);
    if (it != emit_id_.end()) return it->second;
    int32_t id = int32_t(emitted_.size());
    emitted_.push_back({eid, label});
    emit_id_.emplace(key, id);
    return id;
}

void LazyStore::emitted_of(int32_t eid, std::vector<int32_t>& out) const {
    size_t start = out.size();
    for (; eid > 0; eid = emitted_[eid].first) out.push_back(emitted_[eid].second);
    std::reverse(out.begin() + start, out.end());
}

const std::vector<LazyStore::Group>& LazyStore::part(int32_t state, int32_t acc, bool absolute, int b) {
    uint64_t key = ((((uint64_t(uint32_t(state)) << 8) | uint64_t(b)) << 1 | uint64_t(absolute)) << 31) ^
                   uint64_t(uint32_t(acc + 1));
    auto found = parts_.find(key);
    if (found != parts_.end()) return found->second;
    std::vector<Group>& out = parts_[key];
    std::unordered_map<uint64_t, int32_t> group_of;
    auto record = [&](int32_t node, std::vector<Item>& items) {
        int32_t t0 = trie_->tok_off[node], t1 = trie_->tok_off[node + 1];
        if (t0 == t1) return;
        for (Item& it : items) {
            if (it.group < 0) {
                uint64_t gk = (uint64_t(uint32_t(it.state)) << 32) | uint32_t(it.eid);
                auto [pos, fresh] = group_of.emplace(gk, int32_t(out.size()));
                if (fresh) out.push_back(Group{it.state, it.eid, {}});
                it.group = pos->second;
            }
            auto& toks = out[it.group].tokens;
            toks.insert(toks.end(), trie_->tok_ids.begin() + t0, trie_->tok_ids.begin() + t1);
        }
    };
    const int32_t tab = g_.tab_len;
    std::vector<std::vector<Item>> front(size_t(trie_->max_depth) + 1);
    const int32_t r = trie_->first_child[b];
    front[1].push_back(Item{state, acc, absolute, 0});
    record(r, front[1]);
    for (int32_t i = r + 1, end = trie_->subtree_end[r]; i < end;) {
        const int32_t d = trie_->depth[i];
        const int c = trie_->byte[i];
        std::vector<Item>& nxt = front[d];
        nxt.clear();
        for (const Item& it : front[d - 1]) {
            const int64_t k = int64_t(it.state) * 256 + c;
            for (int64_t e = a_.ptr[k]; e < a_.ptr[k + 1]; ++e) {
                const uint8_t kind = a_.kind[e];
                int32_t acc2 = 0;
                bool abs2 = false;
                if (kind == NL_GOES_ON) {
                    acc2 = indent_step(it.acc, c, tab);
                    abs2 = it.absolute || c == 10;
                } else if (kind == NL_STARTS) {
                    acc2 = indent_step(NO_LINE_BREAK, c, tab);
                    abs2 = true;
                }
                int32_t lab = a_.lab[e];
                if (a_.ends_nl[e]) {
                    if (acc2 < 0) continue;  // lark's Indenter cannot read a NEWLINE with no line break
                    if (lab >= 0) lab = INDENT_BASE + 2 * acc2 + int32_t(abs2);
                }
                const int32_t st2 = a_.nxt[e];
                const int32_t eid2 = lab >= 0 ? extend(it.eid, lab) : it.eid;
                if (!a_.in_nl[st2]) acc2 = 0, abs2 = false;
                // the same state and labels: the same group (a self-loop, most bytes of most lexemes)
                Item n{st2, acc2, abs2, eid2, st2 == it.state && eid2 == it.eid ? it.group : -1};
                if (nxt.empty() || std::find(nxt.begin(), nxt.end(), n) == nxt.end()) nxt.push_back(n);
            }
        }
        ++walked_;
        if (nxt.empty()) {
            i = trie_->subtree_end[i];  // no token through here can be lexed: skip them all
            continue;
        }
        record(i, nxt);
        ++i;
    }
    return out;
}

int32_t LazyStore::intern_union(const std::vector<const std::vector<int32_t>*>& lists) {
    const size_t W = size_t(g_.n_words), dense_from = std::max<size_t>(64, W / 2);  // as flat_grammar.py
    size_t total = 0;
    for (auto* l : lists) total += l->size();
    ids_.clear();
    if (total <= 4 * W) {  // few tokens: sort them
        for (auto* l : lists) ids_.insert(ids_.end(), l->begin(), l->end());
        std::sort(ids_.begin(), ids_.end());
        ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
        if (ids_.size() <= dense_from) return intern(ids_.data(), ids_.size(), nullptr);
    }
    words_.assign(W, 0u);  // many: a bitset, no sort
    if (!ids_.empty())
        for (int32_t x : ids_) words_[x >> 5] |= 1u << (x & 31);
    else
        for (auto* l : lists)
            for (int32_t x : *l) words_[x >> 5] |= 1u << (x & 31);
    size_t count = 0;
    for (uint32_t w : words_) count += size_t(__builtin_popcount(w));
    if (count > dense_from) return intern(nullptr, count, words_.data());
    ids_.clear();
    for (size_t i = 0; i < W; ++i)
        for (uint32_t w = words_[i]; w; w &= w - 1) ids_.push_back(int32_t(i * 32 + __builtin_ctz(w)));
    return intern(ids_.data(), ids_.size(), nullptr);
}

int32_t LazyStore::intern(const int32_t* ids, size_t n, const uint32_t* words) {
    // a set of n tokens: sorted `ids` (sparse) or `words` (dense, n > dense_from)
    const size_t W = size_t(g_.n_words);
    uint64_t h = 1469598103934665603ull ^ n;
    if (words)
        for (size_t i = 0; i < W; ++i) h = (h ^ words[i]) * 1099511628211ull;
    else
        for (size_t i = 0; i < n; ++i) h = (h ^ uint32_t(ids[i])) * 1099511628211ull;
    auto& same = set_index_[h];
    for (int32_t sid : same) {
        if (size_t(s_len_[sid]) != n || bool(s_kind_[sid]) != bool(words)) continue;
        if (words ? std::equal(words, words + W, s_words_.begin() + s_off_[sid])
                  : std::equal(ids, ids + n, s_ids_.begin() + s_off_[sid]))
            return sid;
    }
    const int32_t sid = int32_t(s_kind_.size());
    s_len_.push_back(int32_t(n));
    if (words) {
        s_kind_.push_back(1);
        s_off_.push_back(int64_t(s_words_.size()));
        s_words_.insert(s_words_.end(), words, words + W);
    } else {
        s_kind_.push_back(0);
        s_off_.push_back(int64_t(s_ids_.size()));
        s_ids_.insert(s_ids_.end(), ids, ids + n);
    }
    same.push_back(sid);
    return sid;
}

void LazyStore::build(int32_t q) {
    if (root_[q] >= 0) return;
    // 1. every token's outcomes from q, as (end state, labels emitted) -> token lists
    std::map<std::pair<std::vector<int32_t>, int32_t>, std::vector<const std::vector<int32_t>*>> rows;
    std::vector<int32_t> seq;
    const int32_t tab = g_.tab_len;
    for (int b = 0; b < 256; ++b) {
        if (trie_->first_child[b] < 0) continue;
        const int64_t k = int64_t(q) * 256 + b;
        for (int64_t e = a_.ptr[k]; e < a_.ptr[k + 1]; ++e) {
            const uint8_t kind = a_.kind[e];
            int32_t acc = 0;
            bool absolute = false;
            if (kind == NL_GOES_ON) {
                acc = indent_step(0, b, tab);  // a carried NEWLINE: relative to the live indentation
                absolute = b == 10;
            } else if (kind == NL_STARTS) {
                acc = indent_step(NO_LINE_BREAK, b, tab);
                absolute = true;
            }
            int32_t lead = -1;
            if (a_.ends_nl[e]) {
                if (acc < 0) continue;
                if (a_.lab[e] >= 0) lead = INDENT_BASE + 2 * acc + int32_t(absolute);
                acc = 0, absolute = false;
            } else if (a_.lab[e] >= 0) {
                lead = a_.lab[e];
            }
            const int32_t nxt = a_.nxt[e];
            if (!a_.in_nl[nxt]) acc = 0, absolute = false;
            for (const Group& grp : part(nxt, acc, absolute, b)) {
                const int32_t ent = a_.c_ent[grp.end];
                if (ent < 0) continue;  // the lexeme in progress can never end validly
                seq.clear();
                if (lead >= 0) seq.push_back(lead);
                emitted_of(grp.eid, seq);
                rows[{seq, ent}].push_back(&grp.tokens);
            }
        }
    }
    // 2. rows: one merged set of those needing no parser question, the rest as a trie
    //    over their emitted labels (breadth-first, each node's children contiguous)
    struct Node {
        std::map<int32_t, int32_t> children;
        std::vector<std::pair<int32_t, int32_t>> rows;  // (entered id, set id)
    };
    std::vector<Node> tree(1);
    std::vector<const std::vector<int32_t>*> free_lists;
    for (auto& [key, lists] : rows) {
        const auto& [labels, ent] = key;
        const bool free = labels.empty() &&
                          (g_.e_off[ent] == g_.e_off[ent + 1] ||
                           std::any_of(g_.e_labels.p + g_.e_off[ent], g_.e_labels.p + g_.e_off[ent + 1],
                                       [](int32_t x) { return x < 0; }));
        if (free) {
            free_lists.insert(free_lists.end(), lists.begin(), lists.end());
            continue;
        }
        const int32_t sid = intern_union(lists);
        int32_t node = 0;
        for (int32_t elem : labels) {
            auto it = tree[node].children.find(elem);
            if (it == tree[node].children.end()) {
                int32_t child = int32_t(tree.size());
                tree[node].children.emplace(elem, child);
                tree.emplace_back();
                node = child;
            } else {
                node = it->second;
            }
        }
        tree[node].rows.push_back({ent, sid});
    }
    uncond_[q] = free_lists.empty() ? -1 : intern_union(free_lists);
    const int32_t base = int32_t(row_off_.size()) - 1;
    std::vector<int32_t> order{0};
    for (size_t k = 0; k < order.size(); ++k) {
        const Node& node = tree[order[k]];
        for (auto& [ent, sid] : node.rows) {
            row_ent_.push_back(ent);
            row_set_.push_back(sid);
        }
        row_off_.push_back(int32_t(row_ent_.size()));
        for (auto& [elem, child] : node.children) {
            edge_elem_.push_back(elem);
            edge_child_.push_back(base + int32_t(order.size()));
            order.push_back(child);
        }
        edge_off_.push_back(int32_t(edge_elem_.size()));
    }
    root_[q] = base;
    ++n_built_;
    refresh_views();
}

void LazyStore::refresh_views() {
    auto view = [](auto& vec, auto& v) {
        v.p = vec.data();
        v.n = vec.size();
    };
    view(root_, g_.t_root);
    view(uncond_, g_.t_uncond);
    view(edge_off_, g_.t_edge_off);
    view(edge_elem_, g_.t_edge_elem);
    view(edge_child_, g_.t_edge_child);
    view(row_off_, g_.t_row_off);
    view(row_ent_, g_.t_row_ent);
    view(row_set_, g_.t_row_set);
    view(s_kind_, g_.s_kind);
    view(s_off_, g_.s_off);
    view(s_len_, g_.s_len);
    view(s_ids_, g_.s_ids);
    view(s_words_, g_.s_words);
}

}  // namespace cad
