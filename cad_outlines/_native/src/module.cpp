// Python bindings (nanobind): the grammar from flat numpy arrays, the matcher, batches.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch.h"
#include "byte_automaton.h"
#include "dfa.h"
#include "grammar.h"
#include "lalr.h"
#include "lazy_store.h"
#include "lexer_tables.h"
#include "matcher.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cad {

// A batch whose masks look cheaper than this in all (from the first one's time) runs on the
// calling thread alone.
constexpr int BATCH_INLINE_US = 60;

// The grammar plus references that keep its arrays (memory-mapped or not) alive.
struct PyGrammar {
    Grammar g;
    std::vector<nb::object> keep;
    std::unique_ptr<LazyStore> lazy;
};

template <class T>
static void bind_array(PyGrammar& pg, nb::dict arrays, const char* name, View<T>& view) {
    if (!arrays.contains(name)) throw std::invalid_argument(std::string("flat grammar lacks array ") + name);
    nb::object obj = arrays[name];
    auto arr = nb::cast<nb::ndarray<const T, nb::c_contig, nb::device::cpu>>(obj);
    view.p = arr.data();
    view.n = arr.size();
    pg.keep.push_back(obj);
}

static int32_t meta_int(nb::dict meta, const char* name) { return nb::cast<int32_t>(meta[name]); }

static void make_grammar(PyGrammar* pg, nb::dict a, nb::dict meta, std::shared_ptr<VocabTrie> trie) {
    Grammar& g = pg->g;
#define ARR(name) bind_array(*pg, a, #name, g.name)
    ARR(p_action); ARR(p_goto); ARR(p_rule_lhs); ARR(p_rule_len); ARR(label_term); ARR(p_open); ARR(p_close);
    ARR(l_trans); ARR(l_label); ARR(l_shadow); ARR(l_dead); ARR(l_auto_off); ARR(l_guard); ARR(l_first);
    ARR(l_comp); ARR(l_starters); ARR(l_starters_off); ARR(l_comp_off); ARR(l_live); ARR(l_block);
    ARR(l_blocked); ARR(l_pending); ARR(l_comp_none); ARR(l_ignored);
    ARR(c_owner); ARR(c_state); ARR(c_cons); ARR(c_entered); ARR(c_final); ARR(c_cons_off); ARR(c_entered_off);
    ARR(c_entered_valid);
    ARR(e_off); ARR(e_labels);
    ARR(v_allowed); ARR(v_eos); ARR(v_bytes_off); ARR(v_bytes);
    const bool lazy = meta.contains("lazy") && nb::cast<bool>(meta["lazy"]);
    ByteAutomatonView ba;
    if (lazy) {  // the byte automaton instead of the store, which is built on first use
        bind_array(*pg, a, "a_ptr", ba.ptr); bind_array(*pg, a, "a_class", ba.cls); bind_array(*pg, a, "a_nxt", ba.nxt);
        bind_array(*pg, a, "a_lab", ba.lab); bind_array(*pg, a, "a_kind", ba.kind);
        bind_array(*pg, a, "a_ends_nl", ba.ends_nl); bind_array(*pg, a, "a_in_nl", ba.in_nl);
        bind_array(*pg, a, "c_ent", ba.c_ent);
    } else {
        ARR(t_root); ARR(t_uncond); ARR(t_edge_off); ARR(t_edge_elem); ARR(t_edge_child); ARR(t_row_off);
        ARR(t_row_ent); ARR(t_row_set);
        ARR(s_kind); ARR(s_off); ARR(s_len); ARR(s_ids); ARR(s_words);
    }
#undef ARR
#define META(name) g.name = meta_int(meta, #name)
    META(n_states); META(n_terms); META(n_nonterms); META(start_state); META(end_state); META(end_term);
    META(nl_term); META(indent_term); META(dedent_term); META(n_terminals);
    META(indent_label); META(indent_owner); META(tab_len); META(n_labels); META(vocab_size); META(n_words);
#undef META
    g.has_indenter = nb::cast<bool>(meta["has_indenter"]);
    if (a.contains("p_rule_guard")) {
        bind_array(*pg, a, "p_rule_guard", g.p_rule_guard);
        bind_array(*pg, a, "p_guard_off", g.p_guard_off);
        bind_array(*pg, a, "p_guard_mask", g.p_guard_mask);
        g.has_guards = true;
        g.guard_open = meta_int(meta, "guard_open");
        g.guard_close = meta_int(meta, "guard_close");
        if (g.has_indenter) throw std::invalid_argument("flat grammar: object guards and an indenter both keep levels");
        if (g.p_rule_guard.size() != g.p_rule_len.size())
            throw std::invalid_argument("flat grammar: p_rule_guard must have one entry per rule");
        const int64_t n_checks = int64_t(g.p_guard_off.size()) - 1;
        if (n_checks < 0 || g.p_guard_off[0] != 0 || int64_t(g.p_guard_off[size_t(n_checks)]) != int64_t(g.p_guard_mask.size()))
            throw std::invalid_argument("flat grammar: p_guard_off must index p_guard_mask");
        for (int64_t j = 0; j < n_checks; ++j)
            if (g.p_guard_off[size_t(j)] > g.p_guard_off[size_t(j) + 1])
                throw std::invalid_argument("flat grammar: p_guard_off must not decrease");
        for (size_t r = 0; r < g.p_rule_guard.size(); ++r)
            if (g.p_rule_guard[r] > 31 || int64_t(g.p_rule_guard[r]) < -n_checks)
                throw std::invalid_argument("flat grammar: an object guard is a name bit (1 .. 31) or a close check");
        if (g.guard_open < 0 || g.guard_open >= g.n_terms || g.guard_close < 0 || g.guard_close >= g.n_terms)
            throw std::invalid_argument("flat grammar: guard_open/guard_close must be terminals");
    }
    if (lazy) {
        if (ba.cls.size() != 256)
            throw std::invalid_argument("lazy flat grammar: a_class must map each of the 256 bytes");
        for (size_t b = 0; b < 256; ++b) ba.n_classes = std::max<int32_t>(ba.n_classes, int32_t(ba.cls[b]) + 1);
        if (ba.ptr.size() != g.n_configs() * size_t(ba.n_classes) + 1 || ba.in_nl.size() != g.n_configs() ||
            ba.c_ent.size() != g.n_configs() || ba.nxt.size() != ba.lab.size() || ba.kind.size() != ba.nxt.size() ||
            ba.ends_nl.size() != ba.nxt.size())
            throw std::invalid_argument("lazy flat grammar: byte automaton arrays have inconsistent sizes");
        if (!trie) trie = std::make_shared<VocabTrie>(g.v_bytes_off.p, g.v_bytes.p, g.v_allowed.p, g.vocab_size);
        else if (trie->vocab_size != g.vocab_size)
            throw std::invalid_argument("the vocabulary trie is for " + std::to_string(trie->vocab_size) +
                                        " tokens; the grammar's vocabulary has " + std::to_string(g.vocab_size));
        pg->lazy = std::make_unique<LazyStore>(g, ba, std::move(trie));
        g.lazy = pg->lazy.get();
    }
    // sizes that indexing relies on
    if (g.p_action.size() != size_t(g.n_states) * g.n_terms || g.v_allowed.size() != size_t(g.n_words) ||
        g.v_bytes_off.size() != size_t(g.vocab_size) + 1 || g.t_root.size() != g.n_configs() ||
        g.t_uncond.size() != g.n_configs() || g.c_final.size() != g.n_configs() || g.n_configs() == 0)
        throw std::invalid_argument("flat grammar arrays have inconsistent sizes");
}

using Words = nb::ndarray<int32_t, nb::c_contig, nb::device::cpu>;

// A numpy array that owns the vector's buffer.
template <class T>
static nb::object to_numpy(std::vector<T>&& v) {
    auto* heap = new std::vector<T>(std::move(v));
    nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    size_t shape[1] = {heap->size()};
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(heap->data(), 1, shape, owner));
}

// The byte automaton of a grammar whose l_* views are bound, with its per-configuration arrays,
// into `out` (the GIL released while it is built).
static void automaton_into(const Grammar& g, size_t max_states, nb::dict& out) {
    ByteAutomaton ba;
    {
        nb::gil_scoped_release release;
        ba = build_byte_automaton(g, max_states);
    }
#define OUT(name) out[#name] = to_numpy(std::move(ba.name))
    OUT(c_owner); OUT(c_state); OUT(c_cons); OUT(c_cons_off); OUT(a_ptr); OUT(a_class); OUT(a_nxt); OUT(a_lab);
    OUT(a_kind); OUT(a_ends_nl); OUT(a_in_nl); OUT(c_entered_off); OUT(c_entered); OUT(c_entered_valid);
    OUT(c_final); OUT(c_ent); OUT(e_off); OUT(e_labels);
#undef OUT
}

// The lexer's byte automaton and per-configuration arrays (byte_automaton.h) from the l_*
// arrays and the lexer's meta of a flat grammar.
static nb::dict byte_automaton_arrays(nb::dict a, nb::dict meta, size_t max_states) {
    PyGrammar pg;
    Grammar& g = pg.g;
#define ARR(name) bind_array(pg, a, #name, g.name)
    ARR(l_trans); ARR(l_label); ARR(l_shadow); ARR(l_dead); ARR(l_auto_off); ARR(l_guard); ARR(l_first);
    ARR(l_comp); ARR(l_starters); ARR(l_starters_off); ARR(l_comp_off); ARR(l_live); ARR(l_block);
    ARR(l_blocked); ARR(l_pending); ARR(l_comp_none); ARR(l_ignored);
#undef ARR
#define META(name) g.name = meta_int(meta, #name)
    META(n_terminals); META(indent_label); META(indent_owner); META(tab_len); META(n_labels);
#undef META
    if (g.l_starters_off.size() != 257 || g.l_comp_off.size() != size_t(g.n_terminals) * 256 + 1 ||
        g.l_ignored.size() != size_t(g.n_labels) || g.l_trans.size() != g.l_label.size() * 256)
        throw std::invalid_argument("lexer arrays have inconsistent sizes");
    nb::dict out;
    automaton_into(g, max_states, out);
    return out;
}

template <class T>
static View<T> view_of(const std::vector<T>& v) {
    return View<T>{v.data(), v.size()};
}

using U8 = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using DfaTrans = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using DfaBlock = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using TermDfa = std::tuple<DfaTrans, U8, std::optional<DfaBlock>>;

// The l_* arrays of terminals given as byte DFAs (lexer_tables.h; each made the lexer's tables as
// TerminalAutomaton.build makes them), then the byte automaton over them: what
// flat_grammar.spec_automaton_arrays returns for lexer_spec_from_dfas' spec.
static nb::dict lexer_automaton_arrays(const std::vector<TermDfa>& terms, size_t max_states,
                                       const std::vector<int32_t>& groups) {
    std::vector<TerminalTables> tables;
    tables.reserve(terms.size());
    std::vector<int32_t> label;
    for (const auto& [trans, accept, block] : terms) {
        const size_t n = trans.shape(0);
        if (n == 0 || trans.shape(1) != 256 || accept.size() != n || (block && (block->shape(0) != n ||
                                                                                 block->shape(1) != 256)))
            throw std::invalid_argument("lexer_automaton: a terminal's arrays have inconsistent shapes");
        for (size_t i = 0; i < n * 256; ++i)
            if (trans.data()[i] >= int32_t(n)) throw std::invalid_argument("lexer_automaton: a target out of range");
        label.resize(n);
        for (size_t i = 0; i < n; ++i) label[i] = accept.data()[i] ? 0 : -1;
        tables.push_back(terminal_tables(int32_t(n), trans.data(), label.data(), block ? block->data() : nullptr));
    }
    std::vector<TerminalView> views;
    for (const TerminalTables& t : tables)
        views.push_back(TerminalView{t.m + 1, t.trans.data(), t.label.data(), t.live.data(), t.block.data(),
                                     t.blocked.data(), t.shadow.data()});
    LexerArrays la = lexer_arrays(views, groups);
    Grammar g;
    g.l_trans = view_of(la.l_trans); g.l_label = view_of(la.l_label); g.l_shadow = view_of(la.l_shadow);
    g.l_dead = view_of(la.l_dead); g.l_auto_off = view_of(la.l_auto_off); g.l_guard = view_of(la.l_guard);
    g.l_first = view_of(la.l_first); g.l_comp = view_of(la.l_comp); g.l_starters = view_of(la.l_starters);
    g.l_starters_off = view_of(la.l_starters_off); g.l_comp_off = view_of(la.l_comp_off);
    g.l_live = view_of(la.l_live); g.l_block = view_of(la.l_block); g.l_blocked = view_of(la.l_blocked);
    g.l_pending = view_of(la.l_pending); g.l_comp_none = view_of(la.l_comp_none); g.l_ignored = view_of(la.l_ignored);
    g.n_terminals = la.n_terminals;
    g.n_labels = la.n_labels;
    nb::dict out;
    automaton_into(g, max_states, out);
#define OUT(name) out[#name] = to_numpy(std::move(la.name))
    OUT(l_auto_off); OUT(l_trans); OUT(l_label); OUT(l_live); OUT(l_block); OUT(l_blocked); OUT(l_pending);
    OUT(l_shadow); OUT(l_dead); OUT(l_guard); OUT(l_first); OUT(l_starters_off); OUT(l_starters); OUT(l_comp_none);
    OUT(l_comp_off); OUT(l_comp); OUT(l_ignored);
#undef OUT
    return out;
}
using Tokens = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

static uint32_t* words_of(Words& out, const Grammar& g, size_t rows) {
    if (out.size() < size_t(g.n_words) * rows)
        throw std::invalid_argument("bitmask has " + std::to_string(out.size()) + " int32 words; need " +
                                    std::to_string(size_t(g.n_words) * rows));
    return reinterpret_cast<uint32_t*>(out.data());
}

// A lazy grammar's rows for every live configuration of `ms`, built where missing (the
// GIL released meanwhile: a first use costs milliseconds).
static void ensure_rows(Matcher* const* ms, size_t n) {
    std::vector<std::pair<LazyStore*, int32_t>> missing;
    for (size_t i = 0; i < n; ++i) {
        LazyStore* lz = ms[i]->grammar().lazy;
        if (!lz) continue;
        std::shared_lock<std::shared_mutex> lk(lz->mu);
        for (const Live& lv : ms[i]->state().live)
            if (!lz->built(lv.cfg)) missing.push_back({lz, lv.cfg});
    }
    if (missing.empty()) return;
    nb::gil_scoped_release release;
    for (auto& [lz, cfg] : missing) {
        std::unique_lock<std::shared_mutex> lk(lz->mu);
        lz->build(cfg);
    }
}

// Shared locks on the lazy stores of `ms` (distinct ones once each), held for a call.
struct ReadLocks {
    std::vector<std::shared_lock<std::shared_mutex>> held;
    ReadLocks(Matcher* const* ms, size_t n) {
        std::vector<LazyStore*> seen;
        for (size_t i = 0; i < n; ++i) {
            LazyStore* lz = ms[i]->grammar().lazy;
            if (lz && std::find(seen.begin(), seen.end(), lz) == seen.end()) {
                seen.push_back(lz);
                held.emplace_back(lz->mu);
            }
        }
    }
    explicit ReadLocks(Matcher& m) : ReadLocks(std::vector<Matcher*>{&m}.data(), 1) {}
};

using I64 = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using I32 = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Tab = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using Blk = nb::ndarray<const uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// The vocabulary's byte trie (vocab_trie.h), shared by lazy grammars.
static void bind_vocab_trie(nb::module_& m) {
    using Bytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    using Offs = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    using Bits = nb::ndarray<const uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    nb::class_<VocabTrie>(m, "VocabTrie")
        .def("__init__", [](VocabTrie* self, Offs off, Bytes bytes, Bits allowed) {
                 const size_t V = off.size() - 1;
                 if (off.size() == 0 || allowed.size() * 32 < V || size_t(off.data()[V]) > bytes.size())
                     throw std::invalid_argument("token byte offsets, bytes and allowed bits disagree in size");
                 new (self) VocabTrie(off.data(), bytes.data(), allowed.data(), int32_t(V));
             }, "offsets"_a, "bytes"_a, "allowed"_a,
             "The vocabulary's byte trie (a grammar's v_bytes_off, v_bytes, v_allowed), shared by lazy grammars.")
        .def_prop_ro("n_nodes", &VocabTrie::size)
        .def_prop_ro("n_tokens", &VocabTrie::n_tokens)
        .def_prop_rw("share_walks", [](const VocabTrie& t) { return t.shared->enabled(); },
                     [](VocabTrie& t, bool on) { t.shared->set_enabled(on); },
                     "Whether lazy row builds share walks inside lexemes across the vocabulary's grammars "
                     "(shared_walks.h; the same rows either way).")
        .def_prop_ro("shared_walk_stats", [](const VocabTrie& t) {
                 nb::dict d;
                 d["kept"] = t.shared->n_walks();
                 d["bytes"] = t.shared->n_bytes();
                 d["regions"] = t.shared->n_regions();
                 d["region_bytes"] = t.shared->n_region_bytes();
                 d["made"] = t.shared->n_made.load();
                 d["found"] = t.shared->n_found.load();
                 d["flushes"] = t.shared->n_flushes.load();
                 return d;
             }, "walks inside lexemes kept for the vocabulary's grammars (kept, bytes), their regions (regions, "
                "region_bytes) and, since the last clear, walks made, found, and times the kept walks were "
                "forgotten to make room (flushes)")
        .def_prop_rw("shared_walk_budget", [](const VocabTrie& t) { return t.shared->budget.load(); },
                     [](VocabTrie& t, size_t b) { t.shared->budget = b; }, "bytes of walks kept at most")
        .def_prop_rw("shared_region_budget", [](const VocabTrie& t) { return t.shared->region_budget.load(); },
                     [](VocabTrie& t, size_t b) { t.shared->region_budget = b; },
                     "bytes of regions kept at most (a lexeme region met past it is walked unshared)")
        .def("clear_shared_walks", [](VocabTrie& t) { t.shared->clear(); }, "Forget the kept walks.");
}

// The grammar over flat arrays (grammar.h).
static nb::class_<PyGrammar> bind_grammar(nb::module_& m) {
    return nb::class_<PyGrammar>(m, "Grammar")
        .def("__init__", [](PyGrammar* self, nb::dict arrays, nb::dict meta, std::shared_ptr<VocabTrie> trie) {
                 new (self) PyGrammar();
                 try {
                     make_grammar(self, arrays, meta, std::move(trie));
                 } catch (...) {
                     self->~PyGrammar();
                     throw;
                 }
             }, "arrays"_a, "meta"_a, "trie"_a = nb::none())
        .def_prop_ro("vocab_size", [](const PyGrammar& p) { return p.g.vocab_size; })
        .def_prop_ro("n_words", [](const PyGrammar& p) { return p.g.n_words; })
        .def_prop_ro("n_configs", [](const PyGrammar& p) { return p.g.n_configs(); })
        .def_prop_ro("lazy", [](const PyGrammar& p) { return bool(p.lazy); });
}

// A copy of a grammar view as a numpy array.
template <class T>
static nb::object view_copy(const View<T>& v) {
    return to_numpy(std::vector<T>(v.p, v.p + v.n));
}

// The store built by the native core (lazy_store.h): rows on first use, or all of them (explore).
static void bind_lazy_store(nb::class_<PyGrammar>& cls) {
    cls.def_prop_ro("configs_built", [](const PyGrammar& p) {
                 if (!p.lazy) return p.g.n_configs();
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.lazy->configs_built();
             }, "configurations whose rows exist (all of them unless lazy)")
        .def_prop_ro("n_sets", [](const PyGrammar& p) {
                 if (!p.lazy) return p.g.n_sets();
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.g.n_sets();
             })
        .def_prop_ro("walked_nodes", [](const PyGrammar& p) -> size_t {
                 if (!p.lazy) return 0;
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.lazy->walked_nodes();
             }, "trie nodes walked by the lazy builds so far")
        .def_prop_ro("shared_hypotheses", [](const PyGrammar& p) -> size_t {
                 if (!p.lazy) return 0;
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.lazy->canonical_hits();
             }, "hypotheses of the lazy builds walked as another configuration's (LazyStore::canonical)")
        .def_prop_ro("plain_takes", [](const PyGrammar& p) -> size_t {
                 if (!p.lazy) return 0;
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.lazy->plain_takes();
             }, "trie subtrees the lazy builds took whole as plain characters (LazyStore::plain_whole)")
        .def("is_built", [](const PyGrammar& p, int32_t cfg) {
                 if (cfg < 0 || size_t(cfg) >= p.g.n_configs())
                     throw std::invalid_argument("no lexer configuration " + std::to_string(cfg));
                 if (!p.lazy) return true;
                 std::shared_lock<std::shared_mutex> lk(p.lazy->mu);
                 return p.lazy->built(cfg);
             }, "cfg"_a)
        .def("build_config", [](PyGrammar& p, int32_t cfg) {
                 if (!p.lazy) return;
                 if (cfg < 0 || size_t(cfg) >= p.g.n_configs())
                     throw std::invalid_argument("no lexer configuration " + std::to_string(cfg));
                 nb::gil_scoped_release release;
                 std::unique_lock<std::shared_mutex> lk(p.lazy->mu);
                 p.lazy->build(cfg);
             }, "cfg"_a, "Build one configuration's rows now (a lazy grammar; no-op otherwise).")
        .def("explore", [](PyGrammar& p, nb::callable each) {
                 if (!p.lazy) throw std::invalid_argument("explore needs a lazy grammar (the byte automaton)");
                 EagerRows rows;
                 {
                     std::unique_lock<std::shared_mutex> lk(p.lazy->mu);
                     p.lazy->explore(rows, [&](size_t done, size_t n_rows) { each(done, n_rows); });
                 }
                 const Grammar& g = p.g;
                 nb::dict d;
#define OUT(name) d[#name] = to_numpy(std::move(rows.name))
                 OUT(numbered); OUT(visited); OUT(same_as); OUT(row_off); OUT(label_off); OUT(labels); OUT(row_ent);
                 OUT(row_set);
#undef OUT
#define OUT(name) d[#name] = view_copy(g.name)
                 OUT(s_kind); OUT(s_off); OUT(s_len); OUT(s_ids); OUT(s_words);
#undef OUT
                 return d;
             }, "each"_a,
             "Build the rows of every configuration reachable from the initial one by whole tokens (the eager "
             "store; store/native_store.py): a dict of numpy arrays, numbered (automaton states in the order the "
             "store numbers its configurations), visited (in the order built), CSR rows per visited configuration "
             "(row_off; per row label_off/labels, row_ent an e_off id, row_set; a configuration whose rows equal an "
             "earlier one's has none here and same_as names that one, else -1) and the token sets (s_*). "
             "each(configurations done, rows so far) is called after every configuration; what it raises stops "
             "the walk.");
}

// The matcher (matcher.h).
static void bind_matcher(nb::module_& m) {
    nb::class_<Matcher>(m, "Matcher")
        .def("__init__", [](Matcher* self, const PyGrammar& pg, int64_t max_reductions, int64_t max_depth,
                            int64_t max_bytes) {
                 auto lim = [](int64_t v) { return v < 0 ? INT64_MAX : v; };  // -1: unbounded
                 new (self) Matcher(pg.g, MatcherLimits{lim(max_reductions), lim(max_depth), lim(max_bytes)});
             }, "grammar"_a, "max_reductions"_a = -1, "max_depth"_a = -1, "max_bytes"_a = -1,
             nb::keep_alive<1, 2>(),
             "A matcher; the limits (-1: unbounded) bound every call's work: exceeding one sets `error`.")
        .def("fill", [](Matcher& self, Words out) {
                 uint32_t* w = words_of(out, self.grammar(), 1);
                 Matcher* one = &self;
                 ensure_rows(&one, 1);
                 ReadLocks locks(self);
                 return self.fill_mask(w, thread_scratch());
             }, "out"_a, "Write the legal next tokens as packed bits into `out` (int32 words); False: the matcher "
             "is in error (only EOS is set).")
        .def("fill_profiled", [](Matcher& self, Words out) {
                 uint32_t* w = words_of(out, self.grammar(), 1);
                 int64_t ns[4] = {0, 0, 0, 0};
                 Matcher* one = &self;
                 ensure_rows(&one, 1);
                 ReadLocks locks(self);
                 self.fill_mask(w, thread_scratch(), ns);
                 return std::vector<int64_t>(ns, ns + 4);
             }, "out"_a, "fill, returning nanoseconds in [pending labels, trie walk, union, EOS + cleanup]")
        .def("advance", [](Matcher& self, int32_t token) {
                 ReadLocks locks(self);
                 return self.advance(token);
             }, "token"_a, "0 consumed, 1 not allowed, 2 after EOS, 3 in error")
        .def("advance_many", [](Matcher& self, Tokens t) {
                 ReadLocks locks(self);
                 return self.advance_many(t.data(), t.size());
             }, "tokens"_a, "index of the first token not allowed (all: len), -1 in error")
        .def("validate", [](Matcher& self, Tokens t) {
                 ReadLocks locks(self);
                 return self.validate(t.data(), t.size());
             }, "tokens"_a, "how many leading tokens are allowed, -1 in error")
        .def("rollback", &Matcher::rollback, "n"_a)
        .def("is_accepting", [](Matcher& self) {
                 ReadLocks locks(self);
                 return self.is_accepting();
             }, "1 / 0, -1 in error")
        .def("is_finished", &Matcher::is_finished)
        .def_prop_ro("consumed", &Matcher::consumed)
        .def_prop_ro("committed_bytes", &Matcher::committed_bytes)
        .def_prop_ro("error", [](const Matcher& self) -> std::optional<std::tuple<std::string, int64_t, int64_t,
                                                                                   std::string>> {
                 if (!self.error()) return std::nullopt;
                 const MatcherError& e = *self.error();
                 return std::make_tuple(e.limit, e.value, e.maximum, e.what);
             }, "None, or why the matcher stopped: (limit, value reached (-1: out of memory), limit's value, call)")
        .def_rw("parser_checks", &Matcher::parser_checks)
        .def("live", [](const Matcher& self) {
                 std::vector<std::tuple<int32_t, std::vector<int32_t>, int32_t>> out;
                 for (const Live& lv : self.state().live) out.emplace_back(lv.cfg, lv.pending, lv.acc);
                 return out;
             }, "The live lexer configurations: (store config, labels beyond the committed parser, indentation).")
        .def("copy", [](const Matcher& self) { return new Matcher(self); }, nb::rv_policy::take_ownership);

}

// Batched masks on the thread pool (batch.h).
static void bind_batch(nb::module_& m) {
    m.def("fill_batch", [](std::vector<Matcher*> matchers, Words out, std::vector<int64_t> rows) {
              if (matchers.size() != rows.size()) throw std::invalid_argument("one row index per matcher");
              std::vector<int64_t> failed;
              if (matchers.empty()) return failed;
              if (out.ndim() != 2) throw std::invalid_argument("bitmask must be 2-D (batch, words)");
              const size_t R = out.shape(0), W = out.shape(1);
              for (size_t i = 0; i < matchers.size(); ++i) {
                  if (rows[i] < 0 || size_t(rows[i]) >= R)
                      throw std::invalid_argument("row " + std::to_string(rows[i]) + " outside the bitmask's " +
                                                  std::to_string(R) + " rows");
                  if (size_t(matchers[i]->grammar().n_words) > W)
                      throw std::invalid_argument("bitmask rows have " + std::to_string(W) + " words; need " +
                                                  std::to_string(matchers[i]->grammar().n_words));
              }
              uint32_t* base = reinterpret_cast<uint32_t*>(out.data());
              ensure_rows(matchers.data(), matchers.size());
              nb::gil_scoped_release release;
              ReadLocks locks(matchers.data(), matchers.size());
              std::vector<uint8_t> ok(matchers.size(), 1);
              auto fill = [&](size_t i) {
                  uint32_t* row = base + size_t(rows[i]) * W;
                  std::fill(row, row + W, 0u);
                  ok[i] = matchers[i]->fill_mask(row, thread_scratch());
              };
              // The first mask, timed, tells whether the rest is worth waking the pool for: for
              // cheap masks (a few microseconds each) waking a thread costs more than it saves.
              auto t0 = std::chrono::steady_clock::now();
              fill(0);
              auto first = std::chrono::steady_clock::now() - t0;
              const size_t rest = matchers.size() - 1;
              if (first * rest < std::chrono::microseconds(BATCH_INLINE_US)) {
                  for (size_t i = 1; i <= rest; ++i) fill(i);
              } else {
                  parallel_for(rest, [&](size_t i) { fill(i + 1); });
              }
              for (size_t i = 0; i < ok.size(); ++i)
                  if (!ok[i]) failed.push_back(int64_t(i));
              return failed;
          }, "matchers"_a, "bitmask"_a, "rows"_a,
          "Fill row rows[i] of `bitmask` with matcher i's mask, all at once on the thread pool with the GIL "
          "released; returns the indices of the matchers in error (their rows allow only EOS).");
    m.def("pool_threads", &pool_threads);

}

// The LALR(1) table builder (lalr.h).
static void bind_lalr(nb::module_& m) {
    m.def("build_lalr", [](const I32& is_term, const I32& origin, const I32& rhs_off, const I32& rhs,
                           const I32& priority, int32_t start) {
              if (is_term.size() == 0 || rhs_off.size() != origin.size() + 1 || priority.size() != origin.size() ||
                  size_t(rhs_off.data()[origin.size()]) != rhs.size())
                  throw std::invalid_argument("build_lalr: arrays of inconsistent sizes");
              std::vector<uint8_t> term(is_term.size());
              for (size_t i = 0; i < term.size(); ++i) term[i] = is_term.data()[i] != 0;
              LalrGrammar g{int32_t(term.size()), term.data(), int32_t(origin.size()), origin.data(), rhs_off.data(),
                            rhs.data(), priority.data(), start};
              LalrTables t;
              {
                  nb::gil_scoped_release release;
                  t = build_lalr(g);
              }
              nb::dict d;
              d["end_term"] = t.end_term;
              d["n_states"] = t.n_states;
              d["start_state"] = t.start_state;
              d["end_state"] = t.end_state;
              d["shift_reduce"] = t.shift_reduce;
#define OUT(name) d[#name] = to_numpy(std::move(t.name))
              OUT(duplicates); OUT(undefined); OUT(shift_off); OUT(shift_term); OUT(shift_to); OUT(goto_off);
              OUT(goto_sym); OUT(goto_to); OUT(reduce_off); OUT(reduce_term); OUT(reduce_rule); OUT(collision_state);
              OUT(collision_term); OUT(collision_off); OUT(collision_rules);
#undef OUT
              return d;
          }, "is_term"_a, "origin"_a, "rhs_off"_a, "rhs"_a, "priority"_a, "start"_a,
          "lark's LALR(1) tables (see lalr.h) for the grammar: int32 arrays per symbol is_term, per rule origin, "
          "CSR expansions (rhs_off, rhs) and priority; a start nonterminal. Returns a dict of int32 arrays: "
          "grammar errors (duplicates as (earlier, rule) pairs; undefined as (rule or -1, symbol) pairs), "
          "else n_states, start_state, end_state, end_term (the id of $END: the number of symbols; ints), "
          "per-state CSR shifts (shift_off, shift_term, shift_to), gotos (goto_off, goto_sym, goto_to) and "
          "reductions (reduce_off, "
          "reduce_term, reduce_rule), unresolved reduce/reduce collisions (collision_state, collision_term, "
          "CSR collision_off/collision_rules) and the count of shift/reduce conflicts resolved as shift (an int).");
}

// Terminal automata (dfa.h).
static void bind_dfa(nb::module_& m) {
    m.def("utf8_expand", [](const I64& iv_off, const I64& lo, const I64& hi, const I32& tgt) {
              const size_t n = iv_off.shape(0) - 1;
              if (iv_off.shape(0) < 1 || lo.shape(0) != hi.shape(0) || lo.shape(0) != tgt.shape(0) ||
                  size_t(iv_off.data()[n]) != lo.shape(0))
                  throw std::invalid_argument("utf8_expand: arrays of inconsistent sizes");
              std::vector<int32_t> rows;
              {
                  nb::gil_scoped_release release;
                  rows = utf8_expand(int32_t(n), iv_off.data(), lo.data(), hi.data(), tgt.data());
              }
              return nb::bytes(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(int32_t));
          }, "iv_off"_a, "lo"_a, "hi"_a, "tgt"_a,
          "A code-point DFA's byte table (see dfa.h): per state s the sorted disjoint intervals "
          "[lo, hi) -> tgt in CSR iv_off. Returns the int32 (m x 256) table as bytes.");
    m.def("minimize_dfa", [](const Tab& trans, const I64& label, std::optional<Blk> block) {
              const size_t m = trans.shape(0);
              if (trans.shape(1) != 256 || label.shape(0) != m || m == 0 ||
                  (block && (block->shape(0) != m || block->shape(1) != 256)))
                  throw std::invalid_argument("minimize_dfa: arrays of inconsistent shapes");
              MinimalDfa d;
              {
                  nb::gil_scoped_release release;
                  d = minimize_dfa(int32_t(m), trans.data(), label.data(), block ? block->data() : nullptr);
              }
              return nb::make_tuple(d.n, to_numpy(std::move(d.trans)), to_numpy(std::move(d.label)),
                                    to_numpy(std::move(d.block)));
          }, "trans"_a, "label"_a, "block"_a.none() = nb::none(),
          "Trim, minimise and canonically number a byte DFA (see dfa.h): (n, trans, label, block) with "
          "flat numpy arrays int32 (n * 256), int64 (n) and uint8 (n * 256, empty when no state blocks).");
    using Acc = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
    m.def("unless_product", [](const Tab& trans, const Acc& accept, std::optional<Blk> block,
                               const std::vector<Tab>& str_trans, const std::vector<Acc>& str_accept) {
              const size_t n = trans.shape(0);
              bool ok = trans.shape(1) == 256 && accept.shape(0) == n && n > 0 &&
                        (!block || (block->shape(0) == n && block->shape(1) == 256)) &&
                        str_trans.size() == str_accept.size();
              std::vector<const int32_t*> st;
              std::vector<const uint8_t*> sa;
              for (size_t q = 0; q < str_trans.size() && ok; ++q) {
                  ok = str_trans[q].shape(1) == 256 && str_accept[q].shape(0) == str_trans[q].shape(0) &&
                       str_trans[q].shape(0) > 0;
                  st.push_back(str_trans[q].data());
                  sa.push_back(str_accept[q].data());
              }
              if (!ok) throw std::invalid_argument("unless_product: arrays of inconsistent shapes");
              MinimalDfa d;
              {
                  nb::gil_scoped_release release;
                  d = unless_product(int32_t(n), trans.data(), accept.data(), block ? block->data() : nullptr, st, sa);
              }
              return nb::make_tuple(d.n, to_numpy(std::move(d.trans)), to_numpy(std::move(d.label)),
                                    to_numpy(std::move(d.block)));
          }, "trans"_a, "accept"_a, "block"_a.none(), "str_trans"_a, "str_accept"_a,
          "A regex terminal's DFA refined by its \"unless\" string DFAs, minimised (see dfa.h): "
          "(n, trans, label, block) as minimize_dfa returns them.");
    m.def("pair_outcomes", [](const Tab& ta, const Acc& aa, const Tab& tb, const Acc& ab, int64_t max_pairs) {
              const int64_t na = int64_t(ta.shape(0)), nb_ = int64_t(tb.shape(0));
              if (ta.shape(1) != 256 || tb.shape(1) != 256 || int64_t(aa.shape(0)) != na ||
                  int64_t(ab.shape(0)) != nb_ || na == 0 || nb_ == 0)
                  throw std::invalid_argument("pair_outcomes: arrays of inconsistent shapes");
              std::pair<int32_t, int64_t> got;
              {
                  nb::gil_scoped_release release;
                  got = pair_outcomes(int32_t(na), ta.data(), aa.data(), int32_t(nb_), tb.data(), ab.data(), max_pairs);
              }
              if (got.second == -2) throw std::invalid_argument("pair_outcomes: a target out of range");
              return nb::make_tuple(got.first, got.second);
          }, "trans_a"_a, "accept_a"_a, "trans_b"_a, "accept_b"_a, "max_pairs"_a,
          "Which accepting outcomes the reachable state pairs of two byte DFAs show (see dfa.h): "
          "(bits: 1 a alone, 2 b alone, 4 both; pairs walked, -1 past max_pairs).");
    m.def("terminal_tables", [](const Tab& trans, const I32& label, std::optional<Blk> block) {
              const size_t n = trans.shape(0);
              if (trans.shape(1) != 256 || label.shape(0) != n ||
                  (block && (block->shape(0) != n || block->shape(1) != 256)))
                  throw std::invalid_argument("terminal_tables: arrays of inconsistent shapes");
              for (size_t i = 0; i < n * 256; ++i)
                  if (trans.data()[i] >= int32_t(n)) throw std::invalid_argument("terminal_tables: a target out of range");
              TerminalTables t;
              {
                  nb::gil_scoped_release release;
                  t = terminal_tables(int32_t(n), trans.data(), label.data(), block ? block->data() : nullptr);
              }
              return nb::make_tuple(t.m, to_numpy(std::move(t.trans)), to_numpy(std::move(t.label)),
                                    to_numpy(std::move(t.live)), to_numpy(std::move(t.block)),
                                    to_numpy(std::move(t.blocked)), to_numpy(std::move(t.shadow)));
          }, "trans"_a, "label"_a, "block"_a.none(),
          "A terminal DFA as the lexer's tables (see dfa.h): (m, trans, label, live, block, blocked, shadow), "
          "flat numpy arrays over the m + 1 states (uint8 for the flags).");
}

// The lexer's configurations as a byte automaton (byte_automaton.h).
static void bind_lexer(nb::module_& m) {
    m.def("lexer_automaton", &lexer_automaton_arrays, "terminals"_a, "max_states"_a = size_t(1) << 22,
          "groups"_a = std::vector<int32_t>{},
          "The l_* arrays of terminals in the lexer's order, each a byte DFA (trans int32 (n, 256) with -1 "
          "dead, accept uint8 (n), block uint8 (n, 256) or None; terminal i labelled i, nothing ignored, no "
          "indenter; `groups`: one per terminal, those of a group compete, empty: one group), then the byte "
          "automaton over them, in one dict (lexer_tables.h).");
    m.def("byte_automaton", &byte_automaton_arrays, "arrays"_a, "meta"_a, "max_states"_a = size_t(1) << 22,
          "The lexer's configurations as a byte automaton, with each configuration's entered labels and "
          "end, from a flat grammar's l_* arrays and meta (flat_grammar.flatten_lazy).");
}

}  // namespace cad

using namespace cad;

NB_MODULE(_core, m) {
    m.doc() = "cad_outlines' compiled decode-time core (see docs/engine_runtime.md)";
    bind_vocab_trie(m);
    auto grammar = bind_grammar(m);
    bind_lazy_store(grammar);
    bind_matcher(m);
    bind_batch(m);
    bind_lalr(m);
    bind_dfa(m);
    bind_lexer(m);
}
