#include "lazy_store.h"

#include <algorithm>

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

int32_t LazyStore::prepend(int32_t label, int32_t eid) {
    if (eid == 0) return extend(0, label);
    const uint64_t key = (uint64_t(uint32_t(label)) << 32) | uint32_t(eid);
    auto it = prepend_.find(key);
    if (it != prepend_.end()) return it->second;
    const auto [parent, last] = emitted_[eid];
    const int32_t id = extend(prepend(label, parent), last);
    prepend_.emplace(key, id);
    return id;
}

int32_t LazyStore::node_of(int32_t eid) {
    if (eid == 0) return 0;
    if (node_at_.size() < emitted_.size()) node_at_.resize(emitted_.size(), -1);
    if (node_at_[eid] >= 0) return node_at_[eid];
    const auto [parent, label] = emitted_[eid];
    const int32_t up = node_of(parent), node = int32_t(nodes_.size());
    nodes_.push_back({up, label});
    node_at_[eid] = node;
    touched_.push_back(eid);
    return node;
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
                if (fresh) out.push_back(Group{it.state, it.eid, n_groups_++, {}});
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

int32_t LazyStore::intern_union(const std::vector<const Group*>& groups) {
    // the same groups make the same set: look their ids up before building the union
    ids_.clear();
    for (const Group* grp : groups) ids_.push_back(grp->id);
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    uint64_t h = 1469598103934665603ull ^ ids_.size();
    for (int32_t x : ids_) h = (h ^ uint32_t(x)) * 1099511628211ull;
    auto& same = union_index_[h];
    for (int32_t u : same)
        if (size_t(union_off_[u + 1] - union_off_[u]) == ids_.size() &&
            std::equal(ids_.begin(), ids_.end(), union_gids_.begin() + union_off_[u]))
            return union_sid_[u];
    if (union_off_.empty()) union_off_.push_back(0);
    same.push_back(int32_t(union_sid_.size()));
    union_gids_.insert(union_gids_.end(), ids_.begin(), ids_.end());
    union_off_.push_back(int32_t(union_gids_.size()));
    union_sid_.push_back(-1);
    const size_t W = size_t(g_.n_words), dense_from = std::max<size_t>(64, W / 2);  // as flat_grammar.py
    size_t total = 0;
    for (const Group* grp : groups) total += grp->tokens.size();
    ids_.clear();
    int32_t sid;
    if (total <= 4 * W) {  // few tokens: sort them
        for (const Group* grp : groups) ids_.insert(ids_.end(), grp->tokens.begin(), grp->tokens.end());
        std::sort(ids_.begin(), ids_.end());
        ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
        if (ids_.size() <= dense_from) return union_sid_.back() = intern(ids_.data(), ids_.size(), nullptr);
    }
    words_.assign(W, 0u);  // many: a bitset, no sort
    if (!ids_.empty())
        for (int32_t x : ids_) words_[x >> 5] |= 1u << (x & 31);
    else
        for (const Group* grp : groups)
            for (int32_t x : grp->tokens) words_[x >> 5] |= 1u << (x & 31);
    size_t count = 0;
    for (uint32_t w : words_) count += size_t(__builtin_popcount(w));
    if (count > dense_from) {
        sid = intern(nullptr, count, words_.data());
    } else {
        ids_.clear();
        for (size_t i = 0; i < W; ++i)
            for (uint32_t w = words_[i]; w; w &= w - 1) ids_.push_back(int32_t(i * 32 + __builtin_ctz(w)));
        sid = intern(ids_.data(), ids_.size(), nullptr);
    }
    return union_sid_.back() = sid;
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
    // 1. every token's outcomes from q as rows (labels emitted, entered id) -> groups; each
    //    label sequence is a node of the trie the rows are stored in
    nodes_.assign(1, {-1, -1});
    row_at_.clear();
    rows_.clear();
    hits_.clear();
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
                const int32_t node = node_of(lead >= 0 ? prepend(lead, grp.eid) : grp.eid);
                auto [at, fresh] = row_at_.emplace((uint64_t(node) << 32) | uint32_t(ent), int32_t(rows_.size()));
                if (fresh) rows_.push_back({node, ent, -1});
                Row& row = rows_[at->second];
                hits_.push_back({&grp, row.head});
                row.head = int32_t(hits_.size()) - 1;
            }
        }
    }
    for (int32_t eid : touched_) node_at_[eid] = -1;
    touched_.clear();
    // 2. each node's children by label, and the nodes in preorder: the order of their label
    //    sequences
    const int32_t n_nodes = int32_t(nodes_.size());
    std::vector<int32_t> kids(size_t(n_nodes) - 1), kid_off(size_t(n_nodes) + 1, 0), rank(n_nodes);
    for (int32_t v = 1; v < n_nodes; ++v) kids[v - 1] = v;
    std::sort(kids.begin(), kids.end(), [&](int32_t x, int32_t y) { return nodes_[x] < nodes_[y]; });
    for (int32_t v = 1; v < n_nodes; ++v) ++kid_off[nodes_[v].first + 1];
    for (int32_t v = 0; v < n_nodes; ++v) kid_off[v + 1] += kid_off[v];
    std::vector<int32_t> stack{0};
    for (int32_t r = 0; !stack.empty(); ++r) {
        const int32_t v = stack.back();
        stack.pop_back();
        rank[v] = r;
        for (int32_t c = kid_off[v + 1]; c-- > kid_off[v];) stack.push_back(kids[c]);
    }
    // 3. rows in the order of their (labels, entered id), as they were interned before: one
    //    merged set of those needing no parser question, the rest by node
    std::sort(rows_.begin(), rows_.end(), [&](const Row& x, const Row& y) {
        return rank[x.node] != rank[y.node] ? rank[x.node] < rank[y.node] : x.ent < y.ent;
    });
    std::vector<int32_t> row_from(size_t(n_nodes) + 1, int32_t(rows_.size()));
    std::vector<const Group*> free_groups;
    for (int32_t r = int32_t(rows_.size()); r-- > 0;) row_from[rows_[r].node] = r;
    for (Row& row : rows_) {
        const int32_t ent = row.ent;
        groups_.clear();
        for (int32_t h = row.head; h >= 0; h = hits_[h].next) groups_.push_back(hits_[h].grp);
        const bool free = row.node == 0 &&
                          (g_.e_off[ent] == g_.e_off[ent + 1] ||
                           std::any_of(g_.e_labels.p + g_.e_off[ent], g_.e_labels.p + g_.e_off[ent + 1],
                                       [](int32_t x) { return x < 0; }));
        if (free) {
            free_groups.insert(free_groups.end(), groups_.begin(), groups_.end());
            row.head = -1;  // not a row of the trie
        } else {
            row.head = intern_union(groups_);  // now its set id
        }
    }
    uncond_[q] = free_groups.empty() ? -1 : intern_union(free_groups);
    // 4. the trie, breadth-first, each node's children contiguous
    const int32_t base = int32_t(row_off_.size()) - 1;
    std::vector<int32_t> order{0};
    for (size_t k = 0; k < order.size(); ++k) {
        const int32_t v = order[k];
        for (int32_t r = row_from[v]; r < int32_t(rows_.size()) && rows_[r].node == v; ++r) {
            if (rows_[r].head < 0) continue;
            row_ent_.push_back(rows_[r].ent);
            row_set_.push_back(rows_[r].head);
        }
        row_off_.push_back(int32_t(row_ent_.size()));
        for (int32_t c = kid_off[v]; c < kid_off[v + 1]; ++c) {
            edge_elem_.push_back(nodes_[kids[c]].second);
            edge_child_.push_back(base + int32_t(order.size()));
            order.push_back(kids[c]);
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
