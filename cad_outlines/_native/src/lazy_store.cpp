#include "lazy_store.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include "batch.h"
#include "hash.h"
#include "lexer.h"

namespace cad {

// edge kinds of the byte automaton (engine/lexer_index.py)
constexpr uint8_t NL_GOES_ON = 1, NL_STARTS = 2;
// a build's new walks may share the thread pool when their first bytes' subtrees hold this many
// trie nodes, and then only those not done after PARALLEL_AFTER on the calling thread: a walk a
// woken thread takes may wait for the scheduler, which on a loaded machine costs milliseconds
// (measured: first masks of small JSON Schemas took 0.2 ms alone, 2-10 ms in half the runs when
// every build over 1 << 14 nodes went to the pool at once; 2 cores under load 8)
constexpr size_t PARALLEL_WALK_NODES = size_t(1) << 14;
constexpr std::chrono::microseconds PARALLEL_AFTER{1000};
// a subtree of fewer trie nodes is walked here, not delegated to a walk shared with other grammars
// (SharedWalks): its region and exits cost more than its nodes (a new schema's first mask met
// ~25 key regions under tokens like '{"', each a few nodes deep)
constexpr int32_t MIN_SHARED_WALK_NODES = 64;
// unions of more tokens are made in a bitset (a sort costs more from a few hundred on)
constexpr size_t SORT_MAX = 256;

// (a popcount instruction is a library call without -mpopcnt)
static inline uint32_t popcount32(uint32_t v) {
    v = v - ((v >> 1) & 0x55555555u);
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
    return (((v + (v >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
}

static int32_t indent_step(int32_t acc, int b, int32_t tab) {
    if (b == 10) return 0;
    if (acc < 0) return acc;
    return b == 32 ? acc + 1 : b == 9 ? acc + tab : acc;
}

LazyStore::LazyStore(Grammar& g, ByteAutomatonView a, std::shared_ptr<const VocabTrie> trie)
    : g_(g), a_(a), trie_(std::move(trie)), stays_(new std::atomic<uint64_t>[g.n_configs()]) {
    for (size_t i = 0; i < g.n_configs(); ++i) stays_[i].store(0, std::memory_order_relaxed);
    budget_.reset(new std::atomic<const std::vector<int32_t>*>[size_t(std::max(g.n_terminals, 1))]);
    for (int32_t i = 0; i < g.n_terminals; ++i) budget_[size_t(i)].store(nullptr, std::memory_order_relaxed);
    for (int c = 0; c < 256; ++c) class_of_[c] = byte_class(uint8_t(c));
    for (int c = 0; c < 256; ++c) ++class_off_[__builtin_ctzll(class_of_[c]) + 1];
    for (int k = 0; k < 64; ++k) class_off_[k + 1] += class_off_[k];
    int fill[64];
    std::copy(class_off_, class_off_ + 64, fill);
    for (int c = 0; c < 256; ++c) class_bytes_[fill[__builtin_ctzll(class_of_[c])]++] = uint8_t(c);
    for (int c = 256; c-- > 0;) rep_[a_.cls[size_t(c)]] = c;
    for (int c = 0; c < 256; ++c) {
        const int k = a_.cls[size_t(c)];
        cls_bits_[k] |= class_of_[c];
        if (c == 0 || k != a_.cls[size_t(c - 1)]) cls_runs_.push_back({c, k});
    }
    emitted_.push_back({-1, -1});
    root_.assign(g.n_configs(), -1);
    uncond_.assign(g.n_configs(), -1);
    edge_off_.push_back(0);
    row_off_.push_back(0);
    refresh_views();
}

int32_t LazyStore::extend(int32_t eid, int32_t label) {
    auto [id, fresh] = emit_id_.try_emplace((uint64_t(uint32_t(eid)) << 32) | uint32_t(label), int32_t(emitted_.size()));
    if (fresh) emitted_.push_back({eid, label});
    return id;
}

int32_t LazyStore::prepend(int32_t label, int32_t eid) {
    if (eid == 0) return extend(0, label);
    const uint64_t key = (uint64_t(uint32_t(label)) << 32) | uint32_t(eid);
    const int32_t found = prepend_.find(key);
    if (found >= 0) return found;
    const auto [parent, last] = emitted_[eid];
    const int32_t id = extend(prepend(label, parent), last);
    prepend_.try_emplace(key, id);
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

constexpr uint64_t STAYS_KNOWN = uint64_t(1) << 63;  // no byte class uses the top bit

uint64_t LazyStore::stays(int32_t state) const {
    uint64_t known = stays_[state].load(std::memory_order_relaxed);
    if (known) return known;
    uint64_t out = a_.in_nl[state] ? 0 : ~STAYS_KNOWN;
    for (int c = 0; c < a_.n_classes && out; ++c) {  // by the automaton's classes: their bytes have the same edges
        const int64_t k = int64_t(state) * a_.n_classes + c, e = a_.ptr[k];
        if (a_.ptr[k + 1] != e + 1 || a_.nxt[e] != state || a_.lab[e] >= 0 || a_.ends_nl[e]) out &= ~cls_bits_[c];
    }
    out |= STAYS_KNOWN;
    stays_[state].store(out, std::memory_order_relaxed);
    return out;
}

int32_t LazyStore::walk_extend(Walk& w, int32_t eid, int32_t label) const {
    auto [id, fresh] = w.emit_id.try_emplace((uint64_t(uint32_t(eid)) << 32) | uint32_t(label), int32_t(w.emitted.size()));
    if (fresh) w.emitted.push_back({eid, label});
    return id;
}

void LazyStore::step(Walk& w, const Item* from, size_t n_from, int c, std::vector<Item>& to, bool exits_only) const {
    const int32_t tab = g_.tab_len;
    to.clear();
    for (const Item* it = from; it < from + n_from; ++it) {
        const int64_t k = a_.at(it->state, c);
        for (int64_t e = a_.ptr[k]; e < a_.ptr[k + 1]; ++e) {
            if (exits_only && region_edge(it->state, e, c)) continue;
            const uint8_t kind = a_.kind[e];
            int32_t acc2 = 0;
            bool abs2 = false;
            if (kind == NL_GOES_ON) {
                acc2 = indent_step(it->acc, c, tab);
                abs2 = it->absolute || c == 10;
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
            const int32_t eid2 = lab >= 0 ? walk_extend(w, it->eid, lab) : it->eid;
            if (!a_.in_nl[st2]) acc2 = 0, abs2 = false;
            bool seen = false;
            for (const Item& o : to)
                if (o.state == st2 && o.acc == acc2 && o.absolute == abs2 && o.eid == eid2) {
                    seen = true;
                    break;
                }
            if (seen) continue;
            Item& n = to.emplace_back();  // field by field: a whole Item built aside stalls the copy
            n.state = st2, n.acc = acc2, n.absolute = abs2, n.eid = eid2, n.group = -1;
        }
    }
}

// The walk's fronts (the hypotheses at a node) are interned, and the front after each
// (front, byte) is remembered: most nodes repeat a step taken before (a lexeme going on).
int32_t LazyStore::intern_front(Walk& w, const std::vector<Item>& f) const {
    auto same = [](const Item* x, const Item* y, size_t n) {
        for (size_t k = 0; k < n; ++k)
            if (x[k].state != y[k].state || x[k].acc != y[k].acc || x[k].absolute != y[k].absolute ||
                x[k].eid != y[k].eid)
                return false;
        return true;
    };
    uint64_t h = FNV_OFFSET;
    for (const Item& it : f)
        h = (h ^ ((uint64_t(uint32_t(it.state)) << 32 | uint32_t(it.eid)) + uint64_t(it.acc) * 0x9E3779B97F4A7C15ull +
                  it.absolute)) * FNV_PRIME;
    auto [id, fresh] = w.front_at.find_or_add(h, [&](int32_t v) {
        return size_t(w.fronts[v].len) == f.size() && same(w.front_items.data() + w.fronts[v].off, f.data(), f.size());
    });
    if (!fresh) return id;
    uint64_t keep = ~STAYS_KNOWN;  // the classes on which every hypothesis stays as it is
    for (const Item& it : f) keep &= stays(it.state);
    // once per front, not per node: a walk's fronts are few, its nodes many (and on several threads)
    const bool may_share = f.size() == 1 && trie_->shared->enabled() && pure(f[0].state);
    w.fronts.push_back({int32_t(w.front_items.size()), int32_t(f.size()), keep, 0, nullptr, may_share});
    w.front_items.insert(w.front_items.end(), f.begin(), f.end());
    return id;
}

int32_t LazyStore::next_front(Walk& w, int32_t f, int c) const {
    const uint64_t key = uint64_t(f) << 8 | uint64_t(c);
    const int32_t known = w.moves.find(key);
    if (known >= 0) return known - 1;
    step(w, w.front_items.data() + w.fronts[f].off, size_t(w.fronts[f].len), c, w.probe);
    const int32_t id = w.probe.empty() ? -1 : intern_front(w, w.probe);
    w.moves.try_emplace(key, id + 1);
    return id;
}

int32_t LazyStore::group_index(Walk& w, int32_t state, int32_t eid) const {
    auto [group, fresh] = w.group_of.try_emplace((uint64_t(uint32_t(state)) << 32) | uint32_t(eid),
                                                 int32_t(w.groups.size()));
    if (fresh) {
        w.groups.push_back(Group{state, eid, -1, nullptr, nullptr});
        if (w.spans_of.size() < w.groups.size()) w.spans_of.emplace_back();
        w.spans_of[size_t(group)].clear();
    }
    return group;
}

// the tokens t0 .. t1 of the trie's list join the group of each hypothesis of front f
// (preorder: a group's tokens from consecutive nodes are one range)
void LazyStore::record(Walk& w, int32_t t0, int32_t t1, int32_t f) const {
    if (t0 == t1) return;
    for (int32_t n = 0; n < w.fronts[f].len; ++n) {
        Item& it = w.front_items[size_t(w.fronts[f].off + n)];
        if (it.group < 0) it.group = group_index(w, it.state, it.eid);
        auto& spans = w.spans_of[size_t(it.group)];
        if (!spans.empty() && spans.back().second == t0)
            spans.back().second = t1;
        else
            spans.push_back({t0, t1});
    }
}

// whether front f comes back after every byte of the classes: known from the states of
// hypotheses that each stay as they are; else each class is tried byte by byte once (as a
// NAME goes on, [NAME ended here, NAME going on] is such a front)
bool LazyStore::settled(Walk& w, int32_t f, uint64_t classes) const {
    if ((classes & ~w.fronts[f].settles) == 0) return true;
    if (classes & w.fronts[f].moves) return false;
    for (uint64_t todo = classes & ~w.fronts[f].settles; todo; todo &= todo - 1) {
        const int k = __builtin_ctzll(todo);
        for (int n = class_off_[k]; n < class_off_[k + 1]; ++n)
            if (next_front(w, f, class_bytes_[n]) != f) {
                w.fronts[f].moves |= uint64_t(1) << k;
                return false;
            }
        w.fronts[f].settles |= uint64_t(1) << k;
    }
    return true;
}

void LazyStore::walk(Walk& w) const {
    w.groups.clear();
    w.emitted.assign(1, {-1, -1});
    w.emit_id.clear();
    w.group_of.clear();
    w.front_at.clear();
    w.fronts.clear();
    w.front_items.clear();
    w.moves.clear();
    w.walked = 0;
    w.plain_takes = 0;
    w.at_depth.resize(size_t(trie_->max_depth) + 1);
    w.probe.assign(1, Item{w.state, w.acc, w.absolute, 0});
    walk_below(w, trie_->first_child[w.first_byte], intern_front(w, w.probe));
}

void LazyStore::walk_below(Walk& w, int32_t node, int32_t f) const {
    const VocabTrie& t = *trie_;
    if (delegate(w, node, f)) return;
    w.at_depth[size_t(t.depth[node])] = f;
    record(w, t.tok_off[node], t.tok_off[node + 1], f);
    const int32_t end = t.subtree_end[node];
    if (end > node + 1 && (settled(w, f, t.below[node]) || (plain_whole(w, f, node) && ++w.plain_takes))) {
        record(w, t.tok_off[node + 1], t.tok_off[end], f);
        w.walked += size_t(end - node - 1);
        return;
    }
    for (int32_t i = node + 1; i < end;) {
        const int32_t f2 = next_front(w, w.at_depth[size_t(t.depth[i] - 1)], t.byte[i]);
        ++w.walked;
        if (f2 < 0 || delegate(w, i, f2)) {
            i = t.subtree_end[i];  // no token through here can be lexed, or all are done: skip them
            continue;
        }
        w.at_depth[size_t(t.depth[i])] = f2;
        record(w, t.tok_off[i], t.tok_off[i + 1], f2);
        // the same hypotheses at every node below: the subtree's tokens are theirs at once
        const int32_t stop = t.subtree_end[i];
        if (stop > i + 1 && (settled(w, f2, t.below[i]) || (plain_whole(w, f2, i) && ++w.plain_takes))) {
            record(w, t.tok_off[i + 1], t.tok_off[stop], f2);
            w.walked += size_t(stop - i - 1);  // as if walked node by node
            i = stop;
            continue;
        }
        ++i;
    }
}

bool LazyStore::plain_whole(Walk& w, int32_t f, int32_t node) const {
    if (!canon_on_) return false;  // the eager store numbers the states tokens end in
    const int32_t need = trie_->plain_chars_below[size_t(node)];
    if (need < 0) return false;
    const Walk::Front& fr = w.fronts[size_t(f)];
    for (int32_t n = 0; n < fr.len; ++n)
        if (plain_budget(w.front_items[size_t(fr.off + n)].state) < need) return false;
    return true;
}

bool LazyStore::alone(int32_t q) const {
    const int32_t owner = g_.c_owner[size_t(q)];
    return owner >= 0 && owner < g_.n_terminals && owner != g_.indent_owner && !a_.in_nl[size_t(q)] &&
           g_.c_cons_off[size_t(q) + 1] == g_.c_cons_off[size_t(q)];
}

int32_t LazyStore::plain_budget(int32_t q) const {
    if (!alone(q)) return -1;
    const int32_t owner = g_.c_owner[size_t(q)];
    const std::vector<int32_t>* b = budget_[size_t(owner)].load(std::memory_order_acquire);
    if (!b) {
        std::lock_guard<std::mutex> lk(budget_mu_);
        b = budget_[size_t(owner)].load(std::memory_order_acquire);
        if (!b) {
            budget_store_.push_back(plain_budgets(owner));
            b = &budget_store_.back();
            budget_[size_t(owner)].store(b, std::memory_order_release);
        }
    }
    return b->empty() ? -1 : (*b)[size_t(g_.c_state[size_t(q)] - g_.l_auto_off[size_t(owner)])];
}

std::vector<int32_t> LazyStore::plain_budgets(int32_t owner) const {
    const int32_t off = g_.l_auto_off[size_t(owner)];
    const int32_t n = g_.l_auto_off[size_t(owner) + 1] - off;
    auto tr = [&](int32_t s, int b) { return g_.l_trans[size_t(off + s) * 256 + size_t(b)] - off; };
    auto good = [&](int32_t s) { return g_.l_live[size_t(off + s)] && g_.l_label[size_t(off + s)] < 0; };
    // one label for all its accepting states (no "unless" retyping): a live state's entered labels
    // are that one, wherever in the lexeme it is
    int32_t label = -1;
    for (int32_t s = 0; s < n; ++s) {
        const int32_t l = g_.l_label[size_t(off + s)];
        if (l < 0) continue;
        if (label >= 0 && l != label) return {};
        label = l;
    }
    // each plain character's byte ranges (plain_step in vocab_trie.cpp), read on one byte of each of the
    // byte automaton's classes (bytes every automaton state treats alike; rep_: the first of each) a range meets
    static const uint8_t shapes[][4][2] = {
        {{0x20, 0x21}}, {{0x23, 0x5B}}, {{0x5D, 0x7F}},
        {{0xC2, 0xDF}, {0x80, 0xBF}},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}}, {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}}, {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}, {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}};
    static const int shape_len[] = {1, 1, 1, 2, 3, 3, 3, 3, 4, 4, 4};
    // each state's successors after one plain character; `bad`: some character leaves it dead or finished
    std::vector<int32_t> succ_off(size_t(n) + 1, 0), succ;
    std::vector<uint8_t> bad(size_t(n), 0);
    std::vector<int32_t> cur, nxt;
    for (int32_t s = 0; s < n; ++s) {
        const size_t start = succ.size();
        for (int k = 0; k < 11 && !bad[size_t(s)]; ++k) {
            cur.assign(1, s);
            for (int j = 0; j < shape_len[k] && !bad[size_t(s)]; ++j) {
                nxt.clear();
                for (int32_t x : cur)
                    for (int b = shapes[k][j][0]; b <= shapes[k][j][1]; ++b) {
                        const int first = rep_[a_.cls[size_t(b)]];
                        if (first != b && first >= shapes[k][j][0]) continue;  // its class was read
                        const int32_t y = tr(x, b);
                        if (!good(y)) {
                            bad[size_t(s)] = 1;
                            break;
                        }
                        if (std::find(nxt.begin(), nxt.end(), y) == nxt.end()) nxt.push_back(y);
                    }
                cur.swap(nxt);
            }
            if (!bad[size_t(s)])
                for (int32_t y : cur)
                    if (std::find(succ.begin() + int64_t(start), succ.end(), y) == succ.end()) succ.push_back(y);
        }
        succ_off[size_t(s) + 1] = int32_t(succ.size());
    }
    // budget: characters before some character can go wrong (shortest path to a bad state, less
    // one), by a breadth-first search back from the bad states; unreachable: unbounded
    std::vector<std::vector<int32_t>> pred(static_cast<size_t>(n));
    for (int32_t s = 0; s < n; ++s)
        for (int32_t e = succ_off[size_t(s)]; e < succ_off[size_t(s) + 1]; ++e) pred[size_t(succ[size_t(e)])].push_back(s);
    constexpr int32_t UNBOUNDED = 1 << 30;
    std::vector<int32_t> budget(size_t(n), UNBOUNDED), queue;
    for (int32_t s = 0; s < n; ++s)
        if (bad[size_t(s)]) budget[size_t(s)] = 0, queue.push_back(s);
    for (size_t qi = 0; qi < queue.size(); ++qi) {
        const int32_t y = queue[qi];
        for (int32_t x : pred[size_t(y)])
            if (budget[size_t(x)] == UNBOUNDED) budget[size_t(x)] = budget[size_t(y)] + 1, queue.push_back(x);
    }
    return budget;
}

bool LazyStore::pure(int32_t s) const {
    return g_.c_owner[s] >= 0 && !a_.in_nl[s];
}

bool LazyStore::region_edge(int32_t s, int64_t e, int c) const {
    const int32_t t = a_.nxt[e];
    return a_.lab[e] < 0 && a_.kind[e] == 0 && !a_.ends_nl[e] && g_.c_owner[t] == g_.c_owner[s] && !a_.in_nl[t] &&
           g_.l_trans[size_t(g_.c_state[s]) * 256 + size_t(c)] == g_.c_state[t];
}

// at most this many states in a shared region (its signature is 512 bytes a state; int8 states)
constexpr size_t MAX_REGION = 64;

const int32_t* LazyStore::runs_of(int32_t q) const {
    if (runs_at_.empty()) runs_at_.assign(g_.n_configs(), -1);
    int32_t& at = runs_at_[size_t(q)];
    if (at == -1) {
        int32_t cls_tgt[256];
        uint8_t cls_exit[256];
        for (int k = 0; k < a_.n_classes; ++k) {
            // an exit: this grammar has another edge here (the lexeme ends, another one starts)
            cls_tgt[k] = -1, cls_exit[k] = 0;
            const int64_t e0 = int64_t(q) * a_.n_classes + k;
            for (int64_t e = a_.ptr[e0]; e < a_.ptr[e0 + 1]; ++e) {
                if (!region_edge(q, e, rep_[k])) {
                    cls_exit[k] = 1;
                } else if (cls_tgt[k] >= 0) {
                    return (at = -2), nullptr;  // two ways to go on: not one lexeme's automaton
                } else {
                    cls_tgt[k] = a_.nxt[e];
                }
            }
        }
        at = int32_t(state_runs_.size());
        state_runs_.push_back(0);
        int32_t last_tgt = INT32_MIN, last_exit = -1;
        for (auto [c, k] : cls_runs_)  // the bytes of a run of one class go the same way
            if (cls_tgt[k] != last_tgt || cls_exit[k] != last_exit) {
                last_tgt = cls_tgt[k], last_exit = cls_exit[k];
                state_runs_.insert(state_runs_.end(), {c, last_tgt, last_exit});
                ++state_runs_[size_t(at)];
            }
    }
    return at >= 0 ? state_runs_.data() + at : nullptr;
}

int32_t LazyStore::make_region(int32_t s) const {
    // s's lexeme states, breadth first over bytes 0 .. 255 (the canonical numbering), each as its
    // runs of bytes with the same (next state, exit) (shared_walks.h: SharedWalks::region); the
    // runs of a state with the same next state (and exit) are those with the same local number
    auto& states = region_states_;
    auto& key = region_key_;
    auto& local = region_local_;
    if (local.empty()) local.assign(g_.n_configs(), -1);
    states.assign(1, s);
    key.clear();
    local[size_t(s)] = 0;
    struct Reset {  // the scratch back to -1 whatever the outcome
        std::vector<int32_t>& local;
        const std::vector<int32_t>& states;
        ~Reset() {
            for (int32_t q : states) local[size_t(q)] = -1;
        }
    } reset{local, states};
    for (size_t r = 0; r < states.size(); ++r) {
        const int32_t* runs = runs_of(states[r]);
        if (!runs) return -2;
        key.push_back(runs[0]);
        for (const int32_t* run = runs + 1; run < runs + 1 + 3 * runs[0]; run += 3) {
            const int32_t c = run[0], tgt = run[1];
            int32_t v = -1;
            if (tgt >= 0) {
                int32_t& at = local[size_t(tgt)];
                if (at < 0) {
                    if (states.size() == MAX_REGION) return -2;
                    at = int32_t(states.size());
                    states.push_back(tgt);
                }
                v = at;
            }
            key.push_back(c);
            key.push_back(v * 2 + run[2]);
        }
    }
    const int32_t sig = trie_->shared->region(key, int32_t(states.size()));
    if (sig < 0) return -2;  // no room for another region
    Region& reg = regions_.emplace_back();
    reg.sig = sig;
    reg.states = states;
    return int32_t(regions_.size()) - 1;
}

const LazyStore::Region* LazyStore::region(int32_t s) const {
    std::lock_guard<std::mutex> lk(region_mu_);
    if (region_at_.empty()) region_at_.assign(g_.n_configs(), -1);
    int32_t& at = region_at_[size_t(s)];
    if (at == -1) at = make_region(s);
    return at >= 0 ? &regions_[size_t(at)] : nullptr;
}

bool LazyStore::delegate(Walk& w, int32_t node, int32_t f) const {
    const VocabTrie& t = *trie_;
    if (!w.fronts[f].may_share || t.subtree_end[node] - node < MIN_SHARED_WALK_NODES) return false;
    if (!w.fronts[f].reg) {  // the region on the first subtree worth sharing: most fronts never meet one
        w.fronts[f].reg = region(w.front_items[size_t(w.fronts[f].off)].state);
        if (!w.fronts[f].reg) {
            w.fronts[f].may_share = false;
            return false;
        }
    }
    const Region* reg = w.fronts[f].reg;
    auto [sw, made] = t.shared->walk(t, reg->sig, node);
    if (made) w.walked += sw->nodes;
    const int32_t eid = w.front_items[size_t(w.fronts[f].off)].eid;
    // the tokens of the subtree by local end state
    for (size_t g = 0; g < sw->grp_state.size(); ++g) {
        const int32_t state = reg->states[size_t(sw->grp_state[g])];
        auto& spans = w.spans_of[size_t(group_index(w, state, eid))];
        spans.insert(spans.end(), sw->spans.begin() + sw->span_off[g], sw->spans.begin() + sw->span_off[g + 1]);
    }
    // where the lexeme may end: this grammar goes on from there, node by node
    for (auto x = sw->exits.begin(); x != sw->exits.end();) {
        const int32_t k = x->first;
        w.exit_items.clear();
        for (; x != sw->exits.end() && x->first == k; ++x) {
            const Item from{reg->states[size_t(x->second)], 0, false, eid};
            step(w, &from, 1, t.byte[k], w.probe, true);
            for (const Item& it : w.probe) {
                bool seen = false;
                for (const Item& o : w.exit_items) seen = seen || (o.state == it.state && o.acc == it.acc &&
                                                                   o.absolute == it.absolute && o.eid == it.eid);
                if (!seen) w.exit_items.push_back(it);
            }
        }
        if (!w.exit_items.empty()) walk_below(w, k, intern_front(w, w.exit_items));
    }
    return true;
}

void LazyStore::keep(Walk& w) {
    n_plain_ += w.plain_takes;
    local_.assign(w.emitted.size(), 0);
    for (size_t l = 1; l < w.emitted.size(); ++l)  // a parent's id is below its children's
        local_[l] = extend(local_[w.emitted[l].first], w.emitted[l].second);
    size_t n_spans = 0;
    for (size_t g = 0; g < w.groups.size(); ++g) n_spans += w.spans_of[g].size();
    if (n_spans > span_room_) {  // a new block, larger as the store grows
        span_room_ = std::max(n_spans, size_t(1) << std::min<size_t>(16, 10 + span_blocks_.size()));
        span_blocks_.emplace_back(new std::pair<int32_t, int32_t>[span_room_]);
        span_next_ = span_blocks_.back().get();
    }
    std::pair<int32_t, int32_t>* at = span_next_;
    w.part->assign(w.groups.begin(), w.groups.end());
    for (size_t g = 0; g < w.groups.size(); ++g) {
        Group& grp = (*w.part)[g];
        grp.eid = local_[grp.eid];
        grp.id = n_groups_++;
        grp.spans_begin = at;
        at = std::copy(w.spans_of[g].begin(), w.spans_of[g].end(), at);
        grp.spans_end = at;
    }
    span_next_ = at;
    span_room_ -= n_spans;
    walked_ += w.walked;
}

int32_t LazyStore::intern_union(const std::vector<const Group*>& groups) {
    // the same groups make the same set: look their ids up before building the union
    ids_.clear();
    for (const Group* grp : groups) ids_.push_back(grp->id);
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    const uint64_t h = fnv1a(ids_.data(), ids_.size(), FNV_OFFSET ^ ids_.size());
    auto [u, fresh] = union_index_.find_or_add(h, [&](int32_t v) {
        return size_t(union_off_[v + 1] - union_off_[v]) == ids_.size() &&
               std::equal(ids_.begin(), ids_.end(), union_gids_.begin() + union_off_[v]);
    });
    if (!fresh) return union_sid_[u];
    union_gids_.insert(union_gids_.end(), ids_.begin(), ids_.end());
    union_off_.push_back(int32_t(union_gids_.size()));
    union_sid_.push_back(-1);
    const size_t W = size_t(g_.n_words), dense_from = std::max<size_t>(64, W / 2);  // as flat_grammar.py
    size_t total = 0;
    const int32_t* tok = trie_->tok_ids.data();
    for (const Group* grp : groups)
        for (auto [t0, t1] : grp->spans()) total += size_t(t1 - t0);
    ids_.clear();
    int32_t sid;
    if (total <= SORT_MAX) {  // few tokens: sort them
        for (const Group* grp : groups)
            for (auto [t0, t1] : grp->spans()) ids_.insert(ids_.end(), tok + t0, tok + t1);
        std::sort(ids_.begin(), ids_.end());
        ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
        if (ids_.size() <= dense_from) return union_sid_.back() = intern(ids_.data(), ids_.size(), nullptr);
    }
    words_.assign(W, 0u);  // many: a bitset, no sort
    size_t count = ids_.size();
    if (count) {
        for (int32_t x : ids_) words_[x >> 5] |= 1u << (x & 31);
    } else {
        uint32_t* words = words_.data();
        for (const Group* grp : groups)
            for (auto [t0, t1] : grp->spans())
                for (const int32_t* x = tok + t0; x < tok + t1; ++x) words[*x >> 5] |= 1u << (*x & 31);
        for (size_t i = 0; i < W; ++i) count += popcount32(words[i]);
    }
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
    const uint64_t h = words ? hash_long(words, W, FNV_OFFSET ^ n) : hash_long(ids, n, FNV_OFFSET ^ n);
    auto [sid, fresh] = set_index_.find_or_add(h, [&](int32_t v) {
        if (size_t(s_len_[v]) != n || bool(s_kind_[v]) != bool(words)) return false;
        return words ? std::equal(words, words + W, s_words_.begin() + s_off_[v])
                     : std::equal(ids, ids + n, s_ids_.begin() + s_off_[v]);
    });
    if (!fresh) return sid;
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
    return sid;
}

std::deque<LazyStore::Walk>& LazyStore::walk_pool() {
    static thread_local std::deque<LazyStore::Walk> pool;
    return pool;
}

size_t LazyStore::prepare(int32_t q) {
    auto& walks_ = walk_pool();
    // the hypotheses q's first bytes reach, and the walks of the tokens after them
    const int32_t tab = g_.tab_len;
    hyps_.clear();
    size_t n_walks = 0, walk_nodes = 0;
    for (int b = 0; b < 256; ++b) {
        if (trie_->first_child[b] < 0) continue;
        in_lexer_order(a_.at(q, b), [&](int64_t e) {
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
                if (acc < 0) return;
                if (a_.lab[e] >= 0) lead = INDENT_BASE + 2 * acc + int32_t(absolute);
                acc = 0, absolute = false;
            } else if (a_.lab[e] >= 0) {
                lead = a_.lab[e];
            }
            int32_t nxt = a_.nxt[e];
            if (!a_.in_nl[nxt]) acc = 0, absolute = false;
            // inside a lexeme going on (a string's next position): where positions repeat; a lexeme's
            // start is met once per configuration, and its terminal's refinement would cost the first mask
            if (canon_on_ && g_.c_owner[size_t(q)] >= 0 && g_.c_owner[size_t(nxt)] == g_.c_owner[size_t(q)]) {
                const int32_t c = canonical(nxt, trie_->max_len_from[b] - 1);
                n_canonical_ += c != nxt;
                nxt = c;
            }
            // the walk of the tokens after b from that hypothesis, memoised
            const uint64_t key = ((((uint64_t(uint32_t(nxt)) << 8) | uint64_t(b)) << 1 | uint64_t(absolute)) << 31) ^
                                 uint64_t(uint32_t(acc + 1));
            const auto [at, fresh] = part_at_.try_emplace(key, int32_t(parts_.size()));
            if (fresh) parts_.emplace_back();
            std::vector<Group>* part = &parts_[size_t(at)];
            if (fresh) {
                if (walks_.size() <= n_walks) walks_.emplace_back();
                Walk& w = walks_[n_walks++];
                w.state = nxt, w.acc = acc, w.absolute = absolute, w.first_byte = b, w.part = part;
                w.nodes = size_t(trie_->subtree_end[trie_->first_child[b]] - trie_->first_child[b]);
                walk_nodes += w.nodes;
            }
            hyps_.push_back({lead, part});
        });
    }
    // the walks not done before: independent, so on the pool when they are many (the largest
    // first); kept in this order whatever ran first
    if (n_walks > 1 && walk_nodes >= PARALLEL_WALK_NODES && pool_threads() > 1) {
        by_size_.resize(n_walks);
        for (size_t i = 0; i < n_walks; ++i) by_size_[i] = int32_t(i);
        std::stable_sort(by_size_.begin(), by_size_.end(),
                         [&](int32_t x, int32_t y) { return walks_[x].nodes > walks_[y].nodes; });
        // subtree sizes overestimate a walk (most paths die in a byte or two), so the walks
        // start here, and only what is left after PARALLEL_AFTER goes to the pool
        const auto t0 = std::chrono::steady_clock::now();
        size_t done = 0;
        while (done < n_walks && std::chrono::steady_clock::now() - t0 < PARALLEL_AFTER) walk(walks_[by_size_[done++]]);
        if (done < n_walks)
            parallel_for(n_walks - done, [&](size_t i) { walk(walks_[by_size_[done + i]]); });
    } else {
        for (size_t i = 0; i < n_walks; ++i) walk(walks_[i]);
    }
    for (size_t i = 0; i < n_walks; ++i) keep(walks_[i]);
    return n_walks;
}

int32_t LazyStore::canonical(int32_t cfg, int32_t depth) {
    if (!alone(cfg)) return cfg;
    const int32_t owner = g_.c_owner[size_t(cfg)];
    if (canon_.empty()) canon_.resize(size_t(g_.n_terminals));
    if (!canon_cfgs_) {
        canon_cfgs_ = true;
        const size_t n = g_.n_configs();
        for (size_t c = 0; c < n; ++c) {
            const int32_t o = g_.c_owner[c];
            if (o >= 0 && o < g_.n_terminals && g_.c_cons_off[c + 1] == g_.c_cons_off[c])
                canon_[size_t(o)].cfgs.push_back(int32_t(c));
        }
    }
    OwnerCanon& oc = canon_[size_t(owner)];
    if (!oc.ready) canon_owner(owner, oc);
    if (oc.skip || depth < 0) return cfg;
    const int32_t d = std::min(depth, oc.rounds);
    const int32_t base = g_.l_auto_off[size_t(owner)];
    const uint64_t key = (uint64_t(uint32_t(d)) << 32) | uint32_t(oc.class_at(g_.c_state[size_t(cfg)] - base, d));
    const int32_t got = oc.rep.find(key);
    if (got >= 0) return got;
    // the first time this depth is asked for: every configuration of the owner by its class
    for (int32_t x : oc.cfgs)
        oc.rep.try_emplace((uint64_t(uint32_t(d)) << 32) | uint32_t(oc.class_at(g_.c_state[size_t(x)] - base, d)), x);
    return oc.rep.find(key);
}

int32_t LazyStore::OwnerCanon::class_at(int32_t s, int32_t d) const {
    int32_t c = -1;
    for (int32_t e = hist_off[size_t(s)]; e < hist_off[size_t(s) + 1] && hist[size_t(e)].first <= d; ++e)
        c = hist[size_t(e)].second;
    return c;
}

void LazyStore::canon_owner(int32_t owner, OwnerCanon& oc) {
    // Moore's refinement, round by round, with class ids that only split: a state's class can change
    // in a round only where a successor's changed in the round before, so each round recomputes the
    // predecessors of the states that changed (a maxLength chain changes a state or two a round)
    oc.ready = true;
    const int32_t off = g_.l_auto_off[size_t(owner)];
    const int32_t n = g_.l_auto_off[size_t(owner) + 1] - off;
    oc.n = n;
    if (oc.cfgs.size() < 8) {  // too few configurations to share walks
        oc.skip = true;
        return;
    }
    const int32_t max_rounds = std::max(1, trie_->max_depth);
    const std::vector<int> cols(rep_, rep_ + a_.n_classes);  // a byte of each byte class
    const size_t k = cols.size();
    std::vector<int32_t> T(size_t(n) * k), pred_off(size_t(n) + 1, 0), pred;
    for (int32_t s = 0; s < n; ++s)
        for (size_t j = 0; j < k; ++j) T[size_t(s) * k + j] = g_.l_trans[size_t(off + s) * 256 + size_t(cols[j])] - off;
    for (int32_t s = 0; s < n; ++s)
        for (size_t j = 0; j < k; ++j) ++pred_off[size_t(T[size_t(s) * k + j]) + 1];
    for (int32_t s = 0; s < n; ++s) pred_off[size_t(s) + 1] += pred_off[size_t(s)];
    pred.resize(size_t(pred_off[size_t(n)]));
    {
        std::vector<int32_t> fill(pred_off.begin(), pred_off.end() - 1);
        for (int32_t s = 0; s < n; ++s)
            for (size_t j = 0; j < k; ++j) pred[size_t(fill[size_t(T[size_t(s) * k + j])]++)] = s;
    }
    // round 0: what a walk reads of a state alone
    std::vector<int32_t> cls(static_cast<size_t>(n)), size;
    std::vector<std::vector<std::pair<int32_t, int32_t>>> hist(static_cast<size_t>(n));
    {
        int32_t kinds[8];
        std::fill_n(kinds, 8, -1);
        for (int32_t s = 0; s < n; ++s) {
            const size_t gs = size_t(off + s);
            const bool acc = g_.l_label[gs] >= 0, live = g_.l_live[gs], blocked = g_.l_blocked[gs];
            int32_t c;
            if (acc && (live || blocked)) {
                c = int32_t(size.size());  // its lexeme's end leaves a run behind: kept apart
                size.push_back(0);
            } else {
                int32_t& kd = kinds[(acc ? 4 : 0) | (live ? 2 : 0) | (blocked ? 1 : 0)];
                if (kd < 0) kd = int32_t(size.size()), size.push_back(0);
                c = kd;
            }
            cls[size_t(s)] = c;
            ++size[size_t(c)];
            hist[size_t(s)].push_back({0, c});
        }
    }
    // the states each round recomputes: round 1, all of them
    std::vector<int32_t> cand(static_cast<size_t>(n)), changed;
    for (int32_t s = 0; s < n; ++s) cand[size_t(s)] = s;
    std::vector<uint8_t> mark(static_cast<size_t>(n), 0);
    std::vector<int32_t> sig_cls;           // candidates' signature, flattened (1 + k each)
    FlatMap groups;                         // (class, signature hash) -> group index
    std::vector<int32_t> group_first, group_new;
    int32_t round = 0;
    size_t work = 0;
    while (!cand.empty() && round < max_rounds) {
        ++round;
        work += cand.size() * (k + 1);
        if (work > (size_t(1) << 24)) {  // a terminal whose states keep splitting everywhere: not worth it
            oc.skip = true;
            return;
        }
        // signatures under the classes of the round before (none is changed until all are read)
        const size_t m = cand.size();
        sig_cls.resize(m * (k + 1));
        for (size_t i = 0; i < m; ++i) {
            const int32_t s = cand[i];
            sig_cls[i * (k + 1)] = cls[size_t(s)];
            for (size_t j = 0; j < k; ++j) sig_cls[i * (k + 1) + 1 + j] = cls[size_t(T[size_t(s) * k + j])];
        }
        auto same_sig = [&](size_t a, size_t b) {
            return std::equal(sig_cls.begin() + int64_t(a * (k + 1)), sig_cls.begin() + int64_t((a + 1) * (k + 1)),
                              sig_cls.begin() + int64_t(b * (k + 1)));
        };
        // group the candidates by signature (exact: a hash clash is told apart by probing on)
        groups.clear();
        group_first.clear();
        std::vector<int32_t> group_of(m);
        for (size_t i = 0; i < m; ++i) {
            uint64_t h = 0x9E3779B97F4A7C15ull;
            for (size_t j = 0; j <= k; ++j) h = (h ^ uint64_t(uint32_t(sig_cls[i * (k + 1) + j]))) * 0x100000001B3ull;
            int32_t gi = -1;
            for (uint64_t probe = h;; probe = probe * 0x9E3779B97F4A7C15ull + 1) {
                auto [id, fresh] = groups.try_emplace(probe, int32_t(group_first.size()));
                if (fresh) {
                    group_first.push_back(int32_t(i));
                    gi = id;
                    break;
                }
                if (same_sig(size_t(group_first[size_t(id)]), i)) {
                    gi = id;
                    break;
                }
            }
            group_of[i] = gi;
        }
        // per class, the candidates it holds; a class whose other members were not candidates keeps
        // its id for them (their signature is unchanged, and they share it), else for its first group
        for (size_t i = 0; i < m; ++i) mark[size_t(cand[i])] = 1;
        group_new.assign(group_first.size(), -2);  // -2: undecided; -1: keeps its class id
        const int32_t no_group = int32_t(group_first.size());
        FlatMap keeper;  // class -> the group that keeps its id (no_group: none of them, FlatMap values are >= 0)
        FlatMap count_in;
        std::vector<int32_t> counts;
        for (size_t i = 0; i < m; ++i) {
            auto [ci, fresh] = count_in.try_emplace(uint32_t(cls[size_t(cand[i])]), int32_t(counts.size()));
            if (fresh) counts.push_back(0);
            ++counts[size_t(ci)];
        }
        changed.clear();
        for (size_t i = 0; i < m; ++i) {
            const int32_t s = cand[i], c = cls[size_t(s)];
            const int32_t gi = group_of[i];
            if (group_new[size_t(gi)] == -2) {
                const int32_t whole = counts[size_t(count_in.find(uint32_t(c)))] == size[size_t(c)];
                int32_t kg = keeper.find(uint32_t(c));
                if (kg < 0) {
                    if (whole) {
                        keeper.try_emplace(uint32_t(c), gi);  // every member is a candidate: the first group keeps it
                        kg = gi;
                    } else {
                        // the members that were not candidates keep the id: so does the group of their
                        // signature (that of any one of them, with unchanged successors)
                        int32_t u = -1;
                        for (int32_t x = 0; x < n && u < 0; ++x)
                            if (cls[size_t(x)] == c && !mark[size_t(x)]) u = x;
                        work += size_t(n);  // counted against the budget below, as the signatures are
                        bool found = false;
                        for (size_t g2 = 0; g2 < group_first.size() && !found; ++g2) {
                            const size_t f = size_t(group_first[g2]);
                            if (sig_cls[f * (k + 1)] != c) continue;
                            bool same = true;
                            for (size_t j = 0; j < k && same; ++j)
                                same = sig_cls[f * (k + 1) + 1 + j] == cls[size_t(T[size_t(u) * k + j])];
                            if (same) kg = int32_t(g2), found = true;
                        }
                        if (!found) kg = no_group;
                        keeper.try_emplace(uint32_t(c), kg);
                    }
                }
                if (kg == gi) {
                    group_new[size_t(gi)] = -1;
                } else {
                    group_new[size_t(gi)] = int32_t(size.size());
                    size.push_back(0);
                }
            }
            if (group_new[size_t(gi)] >= 0) changed.push_back(s);
        }
        for (size_t i = 0; i < m; ++i) mark[size_t(cand[i])] = 0;
        for (size_t i = 0; i < m; ++i) {
            const int32_t gi = group_of[i];
            if (group_new[size_t(gi)] < 0) continue;
            const int32_t s = cand[i];
            --size[size_t(cls[size_t(s)])];
            cls[size_t(s)] = group_new[size_t(gi)];
            ++size[size_t(cls[size_t(s)])];
            hist[size_t(s)].push_back({round, cls[size_t(s)]});
        }
        // the next round's candidates: predecessors of the states that changed
        cand.clear();
        for (int32_t s : changed)
            for (int32_t e = pred_off[size_t(s)]; e < pred_off[size_t(s) + 1]; ++e) {
                const int32_t x = pred[size_t(e)];
                if (!mark[size_t(x)]) mark[size_t(x)] = 1, cand.push_back(x);
            }
        for (int32_t x : cand) mark[size_t(x)] = 0;
        if (changed.empty()) break;
    }
    oc.rounds = changed.empty() ? max_rounds : round;  // stable: every later round is the same
    oc.hist_off.assign(size_t(n) + 1, 0);
    for (int32_t s = 0; s < n; ++s) oc.hist_off[size_t(s) + 1] = oc.hist_off[size_t(s)] + int32_t(hist[size_t(s)].size());
    oc.hist.clear();
    for (int32_t s = 0; s < n; ++s) oc.hist.insert(oc.hist.end(), hist[size_t(s)].begin(), hist[size_t(s)].end());
}

void LazyStore::build(int32_t q) {
    if (root_[q] >= 0) return;
    prepare(q);
    // the same walks with the same leading labels as a configuration built before: its rows
    uint64_t h = FNV_OFFSET;
    for (const Hyp& hyp : hyps_) h = (h ^ (uint64_t(uintptr_t(hyp.part)) * 31 + uint32_t(hyp.lead))) * FNV_PRIME;
    auto [known, fresh] = same_hyps_.try_emplace(h, int32_t(composed_.size()));
    if (!fresh) {
        const Composed& c = composed_[known];
        if (size_t(c.n_hyps) == hyps_.size() &&
            std::equal(hyps_.begin(), hyps_.end(), composed_hyps_.begin() + c.hyps_off,
                       [](const Hyp& x, const Hyp& y) { return x.lead == y.lead && x.part == y.part; })) {
            // the same rows: share its trie (nodes are never changed once built)
            root_[q] = root_[c.cfg];
            uncond_[q] = uncond_[c.cfg];
            ++n_built_;
            return;
        }
    }
    const int32_t base = int32_t(row_off_.size()) - 1;
    compose(q);
    if (fresh) {
        composed_.push_back({q, int32_t(composed_hyps_.size()), int32_t(hyps_.size())});
        composed_hyps_.insert(composed_hyps_.end(), hyps_.begin(), hyps_.end());
    }
    root_[q] = base;
    ++n_built_;
    refresh_views();
}

void LazyStore::gather() {
    // every token's outcomes from the hypotheses in hyps_ as rows (labels emitted, entered
    // id) -> groups; each label sequence is a node of a trie (nodes_)
    nodes_.assign(1, {-1, -1});
    row_at_.clear();
    rows_.clear();
    hits_.clear();
    for (const Hyp& hyp : hyps_) {
        for (const Group& grp : *hyp.part) {
            const int32_t ent = a_.c_ent[grp.end];
            if (ent < 0) continue;  // the lexeme in progress can never end validly
            const int32_t node = node_of(hyp.lead >= 0 ? prepend(hyp.lead, grp.eid) : grp.eid);
            auto [r, fresh] = row_at_.try_emplace((uint64_t(node) << 32) | uint32_t(ent), int32_t(rows_.size()));
            if (fresh) rows_.push_back({node, ent, -1});
            Row& row = rows_[r];
            hits_.push_back({&grp, row.head});
            row.head = int32_t(hits_.size()) - 1;
        }
    }
    for (int32_t eid : touched_) node_at_[eid] = -1;
    touched_.clear();
}

void LazyStore::order_nodes() {
    // each node's children by label, and the nodes in preorder: the order of their label sequences
    const int32_t n_nodes = int32_t(nodes_.size());
    kids_.assign(size_t(n_nodes) - 1, 0);
    kid_off_.assign(size_t(n_nodes) + 1, 0);
    rank_.assign(size_t(n_nodes), 0);
    auto& kids = kids_;
    auto& kid_off = kid_off_;
    auto& rank = rank_;
    for (int32_t v = 1; v < n_nodes; ++v) kids[v - 1] = v;
    std::sort(kids.begin(), kids.end(), [&](int32_t x, int32_t y) { return nodes_[x] < nodes_[y]; });
    for (int32_t v = 1; v < n_nodes; ++v) ++kid_off[nodes_[v].first + 1];
    for (int32_t v = 0; v < n_nodes; ++v) kid_off[v + 1] += kid_off[v];
    auto& stack = stack_;
    stack.assign(1, 0);
    for (int32_t r = 0; !stack.empty(); ++r) {
        const int32_t v = stack.back();
        stack.pop_back();
        rank[v] = r;
        for (int32_t c = kid_off[v + 1]; c-- > kid_off[v];) stack.push_back(kids[c]);
    }
}

void LazyStore::compose(int32_t q) {
    // 1. every token's outcomes from q as rows (labels emitted, entered id) -> groups; each
    //    label sequence is a node of the trie the rows are stored in
    gather();
    // 2. the nodes in the order of their label sequences
    order_nodes();
    const int32_t n_nodes = int32_t(nodes_.size());
    const auto& kids = kids_;
    const auto& kid_off = kid_off_;
    const auto& rank = rank_;
    // 3. rows in the order of their (labels, entered id), as they were interned before: one
    //    merged set of those needing no parser question, the rest by node
    std::sort(rows_.begin(), rows_.end(), [&](const Row& x, const Row& y) {
        return rank[x.node] != rank[y.node] ? rank[x.node] < rank[y.node] : x.ent < y.ent;
    });
    auto& row_from = row_from_;
    auto& free_groups = free_groups_;
    row_from.assign(size_t(n_nodes) + 1, int32_t(rows_.size()));
    free_groups.clear();
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
    auto& order = order_;
    order.assign(1, 0);
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
}

void LazyStore::eager_rows(EagerRows& out) {
    // the rows of hyps_ one by one, in the order of their (labels, entered labels)
    gather();
    order_nodes();
    const auto& rank = rank_;
    const int32_t* el = g_.e_labels.p;
    std::sort(rows_.begin(), rows_.end(), [&](const Row& x, const Row& y) {
        if (rank[x.node] != rank[y.node]) return rank[x.node] < rank[y.node];
        return std::lexicographical_compare(el + g_.e_off[x.ent], el + g_.e_off[x.ent + 1], el + g_.e_off[y.ent],
                                            el + g_.e_off[y.ent + 1]);
    });
    std::vector<int32_t> seq;
    for (const Row& row : rows_) {
        groups_.clear();
        for (int32_t h = row.head; h >= 0; h = hits_[h].next) groups_.push_back(hits_[h].grp);
        out.row_ent.push_back(row.ent);
        out.row_set.push_back(intern_union(groups_));
        seq.clear();
        for (int32_t v = row.node; v > 0; v = nodes_[v].first) seq.push_back(nodes_[v].second);
        out.labels.insert(out.labels.end(), seq.rbegin(), seq.rend());
        out.label_off.push_back(int64_t(out.labels.size()));
    }
    out.row_off.push_back(int64_t(out.row_ent.size()));
}

void LazyStore::explore(EagerRows& out, const std::function<void(size_t, size_t)>& each) {
    canon_on_ = false;  // the eager store numbers the states its walks end in
    if (n_canonical_ || n_plain_) part_at_.clear();  // walks of lazy builds may end in stand-in states
    const size_t n = g_.n_configs();
    std::vector<uint8_t> numbered(n, 0), seen(n, 0);
    auto number = [&](int32_t s) {
        if (!numbered[s]) numbered[s] = 1, out.numbered.push_back(s);
    };
    // The Python builder's number of each state (its byte automaton was found depth first: a
    // stack, successors numbered as met byte by byte): a part's end states in that order are
    // the order it met them in (its walks are grouped by end state).
    std::vector<int32_t> py_id(n, -1), stack{0};
    py_id[0] = 0;
    int32_t next_id = 1;
    while (!stack.empty()) {
        const int32_t c = stack.back();
        stack.pop_back();
        for (int b = 0; b < 256; ++b)
            in_lexer_order(a_.at(int32_t(c), b), [&](int64_t e) {
                const int32_t t = a_.nxt[e];
                if (py_id[t] < 0) py_id[t] = next_id++, stack.push_back(t);
            });
    }
    std::unordered_map<const std::vector<Group>*, std::vector<int32_t>> ends_of;
    auto ends = [&](const std::vector<Group>* part) -> const std::vector<int32_t>& {
        auto [it, fresh] = ends_of.try_emplace(part);
        if (fresh) {
            auto& v = it->second;
            for (const Group& grp : *part) v.push_back(grp.end);
            std::sort(v.begin(), v.end(), [&](int32_t x, int32_t y) { return py_id[x] < py_id[y]; });
            v.erase(std::unique(v.begin(), v.end()), v.end());
        }
        return it->second;
    };
    // configurations with the same hypotheses have the same rows: copied from the first
    std::map<std::vector<std::pair<int32_t, const void*>>, size_t> same;
    std::vector<std::pair<int32_t, const void*>> key;
    number(0);
    seen[0] = 1;
    std::vector<int32_t> wave{0}, next;
    size_t done = 0, n_rows = 0;
    while (!wave.empty()) {
        next.clear();
        for (int32_t q : wave) {
            prepare(q);
            // the Python builder walked each part the first time a configuration needed it, in
            // this order, numbering its end states as it went (whether or not a lazy build walked
            // the part before this call)
            for (const Hyp& hyp : hyps_)
                if (ends_of.find(hyp.part) == ends_of.end())
                    for (int32_t s : ends(hyp.part)) number(s);
            key.clear();
            for (const Hyp& hyp : hyps_) {
                key.push_back({hyp.lead, hyp.part});
                for (int32_t s : ends(hyp.part))
                    if (!seen[s]) seen[s] = 1, next.push_back(s);
            }
            auto [at, fresh] = same.try_emplace(key, out.visited.size());
            if (fresh) {
                eager_rows(out);
                out.same_as.push_back(-1);
            } else {  // the rows of visited configuration at->second, not repeated
                out.row_off.push_back(out.row_off.back());
                out.same_as.push_back(int32_t(at->second));
            }
            out.visited.push_back(q);
            n_rows += size_t(out.row_off[at->second + 1] - out.row_off[at->second]);
            each(++done, n_rows);
        }
        wave.swap(next);
    }
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
