// The mask store built on first use: a configuration's rows are computed the first time a
// matcher needs its mask (compile_grammar(..., lazy=True)), the native form of
// engine/lexer_index.py's _Indexer plus engine/mask_store.py's rows and
// engine/flat_grammar.py's row trie. Every lexer configuration (the byte automaton's
// states) is known up front; only rows and token sets are built late.
//
// The walk of the tokens after their first byte depends only on the hypothesis that byte
// reached (automaton state, NEWLINE indentation so far), so it is memoised per
// (hypothesis, first byte) and shared by every configuration that reaches it: after the
// first few configurations most are composed from walks already done, and many share the
// row trie of one with the same walks. A build's new walks run on the thread pool; a walk
// remembers its steps and takes whole the subtrees below which nothing changes. Whatever
// ran first, results are kept in one order: the store is the same on every run.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "flat_map.h"
#include "grammar.h"
#include "vocab_trie.h"

namespace cad {

// The byte automaton of the lexer configurations (engine/lexer_index.py ByteAutomaton):
// per (state, byte) a CSR range of edges.
struct ByteAutomatonView {
    View<int64_t> ptr;                       // n_states * n_classes + 1
    View<uint8_t> cls;                       // 256: each byte's class
    int32_t n_classes = 0;
    int64_t at(int32_t state, int b) const { return int64_t(state) * n_classes + cls[size_t(b)]; }
    View<int32_t> nxt, lab;                  // per edge: next state, label shown (-1 none)
    View<uint8_t> kind, ends_nl;             // per edge
    View<uint8_t> in_nl;                     // per state: inside a NEWLINE lexeme
    View<int32_t> c_ent;                     // per state: entered-label set id (-1: cannot end)
};

// The rows of every configuration reachable from the initial one by whole tokens, one by one
// (not merged into a trie): the eager mask store (engine/store/native_store.py), numbered as
// the Python builder (engine/reference/store_builder.py) numbers it.
struct EagerRows {
    std::vector<int32_t> numbered;      // automaton states in the order the store numbers its configurations
    std::vector<int32_t> visited;       // automaton states in the order their rows were built (breadth first)
    std::vector<int64_t> row_off{0};    // per visited configuration: its rows, in (labels, entered) order
    std::vector<int32_t> same_as;       // per visited configuration: the one it has the same rows as (its
                                        // rows are not repeated: none in row_off), or -1
    std::vector<int64_t> label_off{0};  // per row: its emitted labels
    std::vector<int32_t> labels, row_ent, row_set;  // row_ent: an e_off id; row_set: a set id of the store
};

class LazyStore {
public:
    LazyStore(Grammar& g, ByteAutomatonView a, std::shared_ptr<const VocabTrie> trie);
    // Build the rows of configuration `cfg` if not built yet (caller holds mu exclusively).
    void build(int32_t cfg);
    bool built(int32_t cfg) const { return root_[cfg] >= 0; }
    // Every reachable configuration's rows into `out`, breadth first from the initial one;
    // each(configurations done, rows so far, repeated ones counted) after each configuration (it may
    // throw to stop).
    // The token sets are this store's (s_kind ... s_words through the grammar's views).
    void explore(EagerRows& out, const std::function<void(size_t, size_t)>& each);
    size_t configs_built() const { return n_built_; }
    size_t walked_nodes() const { return walked_; }
    size_t canonical_hits() const { return n_canonical_; }
    size_t plain_takes() const { return n_plain_; }
    mutable std::shared_mutex mu;  // readers: masks and advances; writer: build

private:
    struct Group {
        int32_t end;   // automaton state the token ends in
        int32_t eid;   // labels emitted after the first byte (interned sequence)
        int32_t id;    // numbered over all parts: unions are remembered by their groups' ids
        // its tokens: ranges of the trie's tok_ids, in the store's span_blocks_ (set by keep: while
        // a walk runs, they are in its spans_of)
        const std::pair<int32_t, int32_t>*spans_begin, *spans_end;
        struct Spans {
            const std::pair<int32_t, int32_t>*b, *e;
            const std::pair<int32_t, int32_t>* begin() const { return b; }
            const std::pair<int32_t, int32_t>* end() const { return e; }
        };
        Spans spans() const { return {spans_begin, spans_end}; }
    };
    struct Item {
        int32_t state, acc;
        bool absolute;
        int32_t eid;
        int32_t group = -1;  // index of the (state, eid) group in the part, once looked up
    };
    // One walk: its result (groups whose label sequences are interned in the walk's own
    // table, so that walks can run on several threads) and its scratch.
    struct Region;  // below
    struct Walk {
        int32_t state, acc, first_byte;
        bool absolute;
        std::vector<Group>* part;  // where the result is kept
        size_t nodes;              // trie nodes after the first byte (a bound on the work)
        std::vector<Group> groups;
        std::vector<std::vector<std::pair<int32_t, int32_t>>> spans_of;  // per group (reused: only groups.size() are)
        std::vector<std::pair<int32_t, int32_t>> emitted;  // local eid -> (parent, label)
        FlatMap emit_id, group_of;
        // fronts (the hypotheses at a node), interned, with the byte classes known to bring
        // them back or not; the front after (front, byte)
        struct Front {
            int32_t off, len;  // in front_items
            uint64_t settles, moves;
            const Region* reg;  // its one hypothesis' shared region (region(), on the first delegate()), else null
            bool may_share;     // one hypothesis, pure: a large enough subtree is delegated to a shared walk
        };
        InternIndex front_at;  // the fronts, by hash
        std::vector<Front> fronts;
        std::vector<Item> front_items, probe, exit_items;
        FlatMap moves;                  // front << 8 | byte -> front + 1 (0: none)
        std::vector<int32_t> at_depth;  // the front at each depth of the current path
        size_t walked = 0;
        size_t plain_takes = 0;  // subtrees taken whole by plain_whole
    };
    // The walks' scratch, kept by the thread that prepares builds (any store's): a new grammar's
    // first builds reuse what earlier ones allocated. A deque: growing it moves no walk.
    static std::deque<Walk>& walk_pool();
    // The hypothesis an edge of the configuration's first byte reaches, and its walk.
    struct Hyp {
        int32_t lead;  // label the first byte emits (-1 none)
        const std::vector<Group>* part;
    };
    // A row being collected: its node in the label trie, entered id, and groups (a chain
    // through hits_).
    struct Row {
        int32_t node, ent, head;
    };
    struct Hit {
        const Group* grp;
        int32_t next;
    };
    // A configuration whose rows were composed from its hypotheses (hyps_): another with the
    // same ones shares its row trie (most configurations differ only in what the parser has
    // seen).
    struct Composed {
        int32_t cfg;
        int32_t hyps_off, n_hyps;  // its hypotheses in composed_hyps_
    };
    // The hypotheses of cfg's first bytes into hyps_, their new walks done (walk_pool()[0 .. n),
    // n returned, in the order first met).
    size_t prepare(int32_t cfg);
    // A configuration whose walks over `depth` more bytes are those of `cfg` (lazy builds only:
    // the rows of a walk depend on its end states' entered labels, not on which states they are).
    // Inside one terminal's lexeme with no constraint run beside it, the configuration is the
    // terminal's DFA state, and two states that no text of at most `depth` bytes tells apart
    // (Moore's refinement, `depth` rounds, over what a walk reads: accepting, live, and each
    // accepting state that can go on or waits on a lookahead kept apart) walk alike: a
    // maxLength string's positions share their walks until the bound is within a token's length.
    // The smallest such configuration id, or cfg itself.
    int32_t canonical(int32_t cfg, int32_t depth);
    struct OwnerCanon {
        bool ready = false, skip = false;
        int32_t n = 0, rounds = 0;           // local states; the deepest round known (all deeper are the same)
        // each local state's class changes (round, class id), rounds ascending; ids only split
        std::vector<int32_t> hist_off;
        std::vector<std::pair<int32_t, int32_t>> hist;
        std::vector<int32_t> cfgs;           // configurations of this owner with no constraint run, ascending
        FlatMap rep;                         // (round << 32 | class) -> smallest configuration
        int32_t class_at(int32_t s, int32_t round) const;
    };
    void canon_owner(int32_t owner, OwnerCanon& oc);
    // Lazy builds only: whether the tokens strictly below trie node `node` can be taken whole from
    // front f: each of its hypotheses is inside one terminal's lexeme with no run beside it, and
    // takes at least the subtree's plain characters (VocabTrie::plain_chars_below) whatever they
    // are, staying live and unfinished (plain_budget): each token then ends in a configuration
    // whose entered labels are the hypothesis' own, which is all a row reads of it. Inside a
    // maxLength string, a subtree whose tokens fit the characters left is one step, not a walk.
    bool plain_whole(Walk& w, int32_t f, int32_t node) const;
    // How many plain characters configuration q takes whatever they are (staying live and not
    // accepting); -1 where it is not inside one terminal's lexeme alone. Per terminal on first need.
    int32_t plain_budget(int32_t q) const;
    // q is inside one terminal's lexeme with no constraint run beside it (and outside NEWLINE): the
    // configuration is that terminal's DFA state alone
    bool alone(int32_t q) const;
    // the owner's budget per local state (under budget_mu_); empty: its accepting states carry several labels
    std::vector<int32_t> plain_budgets(int32_t owner) const;
    mutable std::unique_ptr<std::atomic<const std::vector<int32_t>*>[]> budget_;  // per terminal; null: not yet
    mutable std::deque<std::vector<int32_t>> budget_store_;                        // what budget_ points into
    mutable std::mutex budget_mu_;
    std::vector<OwnerCanon> canon_;          // per terminal, filled on first need
    bool canon_on_ = true;                   // off while explore() numbers the eager store (it needs end states)
    bool canon_cfgs_ = false;                // canon_[*].cfgs filled
    size_t n_canonical_ = 0;                 // hypotheses canonical() sent to another configuration
    size_t n_plain_ = 0;                     // subtrees the walks took whole by plain_whole
    void gather();       // the rows of hyps_ (rows_, hits_), their label sequences as nodes_
    void order_nodes();  // kids_, kid_off_ and rank_ (preorder: label-sequence order) of nodes_
    void compose(int32_t cfg);  // rows of cfg from hyps_, its walks done
    // f(edge) for the edges of (state, byte) k = a_.at(state, byte) in the Python lexer's
    // order (reference/store_builder.py, Lexer.step): a lexeme going on before the same lexeme
    // ending on that byte. The native lexer lists the ending first (lexer.cpp Lexer::after): a
    // live successor whose state has a label follows its ending partner, and is taken first.
    template <class F>
    void in_lexer_order(int64_t k, F&& f) const {
        const int64_t hi = a_.ptr[k + 1];
        for (int64_t e = a_.ptr[k]; e < hi; ++e) {
            const int32_t t = e + 1 < hi ? a_.nxt[e + 1] : -1;
            if (t >= 0 && g_.c_owner[t] != -1 && g_.l_label[g_.c_state[t]] >= 0) {
                f(e + 1);
                f(e++);
            } else {
                f(e);
            }
        }
    }
    void eager_rows(EagerRows& out);  // the rows of hyps_ one by one
    // The walk of the tokens after w's first byte: walk_below from its hypothesis.
    void walk(Walk& w) const;
    // The tokens of trie subtree `node` (its own included) from front f at the node: each trie
    // node is stepped from its parent's front; a subtree no hypothesis survives is skipped, one
    // on which the front stays is taken whole, one whose front is one hypothesis inside a lexeme
    // with a shared region is delegated (delegate).
    void walk_below(Walk& w, int32_t node, int32_t f) const;
    // The hypotheses after byte c from those in from[0 .. n) (lexemes going on, ending,
    // starting) into `to`; with `exits_only`, without the lexeme going on (exits of a region).
    void step(Walk& w, const Item* from, size_t n, int c, std::vector<Item>& to, bool exits_only = false) const;
    int32_t intern_front(Walk& w, const std::vector<Item>& f) const;
    int32_t next_front(Walk& w, int32_t f, int c) const;  // -1: no hypothesis left
    void record(Walk& w, int32_t t0, int32_t t1, int32_t f) const;
    int32_t group_index(Walk& w, int32_t state, int32_t eid) const;  // the walk's group of (state, eid), made if new
    bool settled(Walk& w, int32_t f, uint64_t classes) const;
    int32_t walk_extend(Walk& w, int32_t eid, int32_t label) const;
    // Walks shared across grammars (shared_walks.h). A state is pure when it is inside a lexeme
    // and outside NEWLINE: its region is the configurations the lexeme going on reaches from
    // there (edges with no label, the same owner, its automaton's step; constraint runs beside
    // it change only which configuration).
    bool pure(int32_t state) const;
    bool region_edge(int32_t state, int64_t e, int c) const;  // edge e (byte c): pure `state`'s lexeme going on
    struct Region {
        int32_t sig;                 // in the trie's SharedWalks
        std::vector<int32_t> states;  // local state -> this grammar's
    };
    const Region* region(int32_t state) const;  // null: not shareable
    int32_t make_region(int32_t state) const;   // regions_ index, -2: not shareable
    // The tokens of subtree `node` from front f, if f is one pure hypothesis: the shared walk of
    // its region, its groups mapped to this grammar's states and its exits walked on from here.
    bool delegate(Walk& w, int32_t node, int32_t f) const;
    // The byte classes (byte_class) on all of whose bytes a hypothesis in `state` stays as it
    // is: one edge, back to the state, no label, outside NEWLINE. Computed on first need
    // (walks on several threads may race to write the same value).
    uint64_t stays(int32_t state) const;
    void keep(Walk& w);  // the walk's groups into its part, their labels interned in the store's
    int32_t extend(int32_t eid, int32_t label);
    int32_t prepend(int32_t label, int32_t eid);
    int32_t node_of(int32_t eid);
    // The set id of the union of the groups' tokens (stored once: equal sets share an id).
    int32_t intern_union(const std::vector<const Group*>& groups);
    int32_t intern(const int32_t* ids, size_t n, const uint32_t* words);
    void refresh_views();

    Grammar& g_;
    ByteAutomatonView a_;
    std::shared_ptr<const VocabTrie> trie_;
    std::unique_ptr<std::atomic<uint64_t>[]> stays_;  // per state; 0: not computed yet
    mutable std::mutex region_mu_;                      // regions, made by walks on any thread
    mutable std::vector<int32_t> region_at_;            // per state: regions_ index, -1 unknown, -2 none
    mutable std::deque<Region> regions_;
    uint64_t class_of_[256];                            // byte_class of each byte
    // the automaton's byte classes: a byte of each, the byte_class bits of its bytes, and the
    // runs of consecutive bytes in one class (first byte, class), in byte order
    int rep_[256];
    uint64_t cls_bits_[256] = {};
    std::vector<std::pair<int, int>> cls_runs_;
    // make_region's scratch (under region_mu_): per state its local number (-1: none)
    mutable std::vector<int32_t> region_local_, region_states_, region_key_;
    // per state (under region_mu_), its lexeme's runs of bytes with the same (next state, exit) as
    // state_runs_[at]: their count, then (first byte, next state or -1, exit) each; at -1: not
    // known yet, -2: two ways to go on (in no region)
    mutable std::vector<int32_t> runs_at_, state_runs_;
    const int32_t* runs_of(int32_t state) const;  // null: two ways to go on
    int class_off_[65] = {};                            // the bytes of each class: class_bytes_[off ..]
    uint8_t class_bytes_[256];
    FlatMap part_at_;                         // (state, first byte, indentation) -> parts_ index
    std::deque<std::vector<Group>> parts_;    // the walks' results (a deque: never moved)
    // the parts' groups' spans, in blocks that never move (one allocation for many parts)
    std::vector<std::unique_ptr<std::pair<int32_t, int32_t>[]>> span_blocks_;
    std::pair<int32_t, int32_t>* span_next_ = nullptr;  // the free pairs at the end of the last block
    size_t span_room_ = 0;
    int32_t n_groups_ = 0;
    std::vector<std::pair<int32_t, int32_t>> emitted_;  // eid -> (parent eid, label); 0 = empty
    FlatMap emit_id_;
    FlatMap prepend_;    // (label, eid) -> eid of label + eid's labels
    InternIndex set_index_;  // the token sets, by content hash
    // unions already interned, by their sorted group ids: most rows recur in later builds
    InternIndex union_index_;                                // the keys, by hash
    std::vector<int32_t> union_off_{0}, union_gids_, union_sid_;  // entry -> key (CSR), set id
    FlatMap same_hyps_;  // hash of a configuration's hypotheses -> composed_
    std::vector<Composed> composed_;
    std::vector<Hyp> composed_hyps_;
    size_t n_built_ = 0, walked_ = 0;
    // the store arrays the grammar's views point into
    std::vector<int32_t> root_, uncond_, edge_off_, edge_elem_, edge_child_, row_off_, row_ent_, row_set_;
    std::vector<uint8_t> s_kind_;
    std::vector<int64_t> s_off_;
    std::vector<int32_t> s_len_, s_ids_;
    std::vector<uint32_t> s_words_;
    // scratch of a build
    std::vector<uint32_t> words_;
    std::vector<int32_t> ids_;
    std::vector<int32_t> node_at_, touched_;               // eid -> label-trie node (-1: none yet)
    std::vector<std::pair<int32_t, int32_t>> nodes_;       // node -> (parent node, label)
    FlatMap row_at_;                                       // (node, entered id) -> row
    std::vector<Row> rows_;
    std::vector<Hit> hits_;
    std::vector<const Group*> groups_;
    std::vector<Hyp> hyps_;
    std::vector<int32_t> by_size_;  // walks, the largest first
    std::vector<int32_t> local_;    // a walk's eid -> the store's
    std::vector<int32_t> kids_, kid_off_, rank_;  // order_nodes
    std::vector<int32_t> stack_, row_from_, order_;  // order_nodes' stack; compose's rows by node, nodes breadth first
    std::vector<const Group*> free_groups_;          // compose's groups of no parser question
};

}  // namespace cad
