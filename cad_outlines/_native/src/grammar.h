// The compiled grammar as read-only views over flat arrays (see engine/flat_grammar.py
// for the layout). Built once, shared by every matcher and thread; never mutated (but for the
// configuration index, built once on first use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cad {

class LazyStore;

constexpr int32_t INDENT_BASE = 1 << 24;
constexpr int32_t NONE = INT32_MIN;

template <class T>
struct View {
    const T* p = nullptr;
    size_t n = 0;
    const T& operator[](size_t i) const { return p[i]; }
    size_t size() const { return n; }
};

struct Grammar {
    // parser: action[state * n_terms + term] = 0 error, k + 1 shift to k, -(r + 1) reduce r
    View<int32_t> p_action, p_goto, p_rule_lhs, p_rule_len, label_term;
    View<uint8_t> p_open, p_close;
    int32_t n_states = 0, n_terms = 0, n_nonterms = 0, start_state = 0, end_state = 0, end_term = -1;
    bool has_indenter = false;
    int32_t nl_term = -1, indent_term = -1, dedent_term = -1;
    // object guards (JSON Schema objects whose required names come in any order, checked beside the
    // LALR tables instead of 2**r parser states): per rule 0, k > 0 (a member: set bit k - 1 of the
    // innermost object's names seen) or -(j + 1) (close check j: every bit of one of its masks
    // p_guard_mask[p_guard_off[j] .. p_guard_off[j + 1]] set); every guard_open shift
    // opens a frame (an object), every guard_close shift ends it. Frames live where an indenter keeps its
    // levels (a grammar has one or the other).
    View<int32_t> p_rule_guard, p_guard_off, p_guard_mask;
    bool has_guards = false;
    int32_t guard_open = -1, guard_close = -1;

    // lexer: all automata states in one global range
    View<int32_t> l_trans, l_label, l_shadow, l_dead, l_auto_off, l_guard, l_first, l_comp, l_starters;
    View<int64_t> l_starters_off, l_comp_off;
    View<uint8_t> l_live, l_block, l_blocked, l_pending, l_comp_none, l_ignored;
    int32_t n_terminals = 0, indent_label = -1, indent_owner = -1, tab_len = 8, n_labels = 0;

    // lexer configurations (the store's)
    View<int32_t> c_owner, c_state, c_cons, c_entered, c_final;
    View<int64_t> c_cons_off, c_entered_off;
    View<uint8_t> c_entered_valid;

    // the mask store as one row trie per configuration
    View<int32_t> t_root, t_uncond, t_edge_off, t_edge_elem, t_edge_child, t_row_off, t_row_ent, t_row_set;
    View<int32_t> e_off, e_labels;

    // token sets
    View<uint8_t> s_kind;
    View<int64_t> s_off;
    View<int32_t> s_len, s_ids;
    View<uint32_t> s_words;

    // vocabulary
    int32_t vocab_size = 0, n_words = 0;
    View<uint32_t> v_allowed;
    View<int32_t> v_eos;
    View<int64_t> v_bytes_off;
    View<uint8_t> v_bytes;

    size_t n_configs() const { return c_owner.size(); }
    size_t n_sets() const { return s_kind.size(); }

    // set when the store is built on first use (lazy_store.h): the t_* and s_* views then
    // point into it, and masks must hold its lock
    LazyStore* lazy = nullptr;

private:
    mutable std::unordered_map<std::string, int32_t> config_ids_;
    mutable std::shared_ptr<std::once_flag> config_ids_once_ = std::make_shared<std::once_flag>();
    void index_configs() const;

public:

    // configuration lookup: key = owner, state, cons...; the index is built on the first lookup (once,
    // whichever thread asks first): a matcher's first mask needs none
    int32_t find_config(int32_t owner, int32_t state, const int32_t* cons, size_t n_cons) const;
    bool is_eos(int32_t token) const {
        for (size_t i = 0; i < v_eos.size(); ++i)
            if (v_eos[i] == token) return true;
        return false;
    }
};

std::string config_key(int32_t owner, int32_t state, const int32_t* cons, size_t n_cons);

}  // namespace cad
