#include "matcher.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace cad {

void Scratch::begin(const Grammar& g) {
    pools.stack.clear();
    pools.levels.clear();
    passing.clear();
    if (set_stamp.size() < g.n_sets()) set_stamp.assign(g.n_sets(), 0), stamp = 0;
    if (lab_stamp.size() < size_t(g.n_labels) + 1) {
        lab_stamp.assign(g.n_labels + 1, 0);
        lab_val.assign(g.n_labels + 1, 0);
        lstamp = 0;
    }
    if (++stamp == 0) std::fill(set_stamp.begin(), set_stamp.end(), 0), stamp = 1;
}

void Scratch::release() {
    pools = Pools();
    passing = std::vector<int32_t>();
    ends = std::vector<LexEnd>();
}

Scratch& thread_scratch() {
    static thread_local Scratch s;
    return s;
}

Matcher::Matcher(const Grammar& g, MatcherLimits limits) : g_(g), limits_(limits) {
    pools_.stack.push_back({g.start_state, NONE});
    pools_.levels.push_back({0, NONE});
    st_.parser = PState{0, 0, 0, 1};
    st_.live.push_back(Live{0, {}, 0});  // store config 0 is the initial one
}

static size_t state_bytes(const MState& m) {
    size_t b = sizeof(MState) + m.live.capacity() * sizeof(Live);
    for (const Live& lv : m.live) b += lv.pending.capacity() * sizeof(int32_t);
    return b;
}

size_t Matcher::committed_bytes() const {
    return (pools_.stack.capacity() + pools_.levels.capacity()) * sizeof(Node) + history_bytes_ + state_bytes(st_);
}

void Matcher::push_history(MState&& m) {
    history_bytes_ += state_bytes(m);
    history_.push_back(std::move(m));
}

// Start one call's work (a mask, one token of an advance or validate): the scratch arena and
// what the call may spend.
void Matcher::begin_call(Scratch& s) const {
    s.begin(g_);
    const int64_t used = int64_t(committed_bytes());
    if (used > limits_.max_bytes) throw LimitExceeded{"max_matcher_bytes", used, limits_.max_bytes};
    const int64_t room = limits_.max_bytes == INT64_MAX ? INT64_MAX : limits_.max_bytes - used;
    s.budget = Budget{0, limits_.max_reductions, limits_.max_depth, size_t(room / int64_t(sizeof(Node))), used};
}

void Matcher::fail(const char* limit, int64_t value, int64_t maximum, const char* what, Scratch& s) {
    error_ = MatcherError{limit, what, value, maximum};
    s.release();
}

// Run one public call; a limit exceeded (or memory exhausted) becomes the sticky error.
template <class F, class R>
R Matcher::guarded(Scratch& s, const char* what, R on_error, F&& body) {
    if (error_) return on_error;
    try {
        return body(s);
    } catch (const LimitExceeded& e) {
        fail(e.limit, e.value, e.maximum, what, s);
    } catch (const std::bad_alloc&) {
        // -1: the system ran out first (maximum -1: the matcher had no limit of its own)
        fail("max_matcher_bytes", -1, limits_.max_bytes == INT64_MAX ? -1 : limits_.max_bytes, what, s);
    }
    return on_error;
}

// The pools' sizes at a mark, restored when it goes out of scope unless kept: nothing of a
// refused or failed multi-token call stays committed.
struct PoolMark {
    Pools& pools;
    size_t stack, levels;
    bool keep = false;
    explicit PoolMark(Pools& p) : pools(p), stack(p.stack.size()), levels(p.levels.size()) {}
    ~PoolMark() {
        if (keep) return;
        pools.stack.resize(stack);
        pools.levels.resize(levels);
    }
};

bool Matcher::run_pending(Parser& p, const PState& from, const std::vector<int32_t>& labels, PState& out) const {
    out = from;
    for (int32_t x : labels)
        if (!p.step_elem(out, x)) return false;
    return true;
}

void Matcher::walk(Parser& p, int32_t node, const PState& st, int32_t acc, bool first, Scratch& s) {
    // rows ending here: pass if a label they may still end as is accepted
    int32_t r0 = g_.t_row_off[node], r1 = g_.t_row_off[node + 1];
    if (r0 < r1) {
        if (++s.lstamp == 0) std::fill(s.lab_stamp.begin(), s.lab_stamp.end(), 0), s.lstamp = 1;
        for (int32_t r = r0; r < r1; ++r) {
            int32_t sid = g_.t_row_set[r];
            if (s.set_stamp[sid] == s.stamp) continue;
            int32_t e = g_.t_row_ent[r];
            bool ok = g_.e_off[e] == g_.e_off[e + 1];
            for (int32_t k = g_.e_off[e]; !ok && k < g_.e_off[e + 1]; ++k) {
                int32_t lab = g_.e_labels[k];
                if (lab < 0) {
                    ok = true;
                    break;
                }
                if (s.lab_stamp[lab] != s.lstamp) {
                    ++parser_checks;
                    bool v;
                    if (lab == g_.indent_label) {
                        v = p.accepts_newline_after(st);
                    } else {
                        PState t = st;
                        v = p.step(t, g_.label_term[lab], 0);
                    }
                    s.lab_stamp[lab] = s.lstamp;
                    s.lab_val[lab] = v;
                }
                ok = s.lab_val[lab];
            }
            if (ok) {
                s.set_stamp[sid] = s.stamp;
                s.passing.push_back(sid);
            }
        }
    }
    for (int32_t k = g_.t_edge_off[node]; k < g_.t_edge_off[node + 1]; ++k) {
        int32_t elem = g_.t_edge_elem[k];
        PState t = st;
        bool ok;
        ++parser_checks;
        if (elem >= INDENT_BASE) {
            int32_t v = elem - INDENT_BASE, value = v >> 1;
            bool absolute = v & 1;
            if (!absolute && first) {
                if (acc < 0) continue;  // no line break in this NEWLINE: lark's Indenter cannot read it
                value += acc;
            }
            ok = p.step(t, g_.nl_term, value);
        } else {
            ok = p.step(t, g_.label_term[elem], 0);
        }
        if (ok) walk(p, g_.t_edge_child[k], t, acc, false, s);
    }
}

void Matcher::mask(uint32_t* out, Scratch& s, int64_t* phase_ns) {
    // phase_ns (optional): nanoseconds in [pending labels, trie walk, union, EOS + cleanup]
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    auto lap = [&](int k) {
        if (!phase_ns) return;
        auto t = clock::now();
        phase_ns[k] += std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
        t0 = t;
    };
    const int32_t W = g_.n_words;
    std::memset(out, 0, size_t(W) * 4);
    if (st_.finished) return;
    begin_call(s);
    Parser p(g_, pools_, s.pools, s.budget);
    for (const Live& lv : st_.live) {
        PState st;
        bool ok = run_pending(p, st_.parser, lv.pending, st);
        lap(0);
        if (!ok) continue;
        int32_t u = g_.t_uncond[lv.cfg];
        if (u >= 0 && s.set_stamp[u] != s.stamp) {
            s.set_stamp[u] = s.stamp;
            s.passing.push_back(u);
        }
        walk(p, g_.t_root[lv.cfg], st, lv.acc, true, s);
        lap(1);
    }
    for (int32_t sid : s.passing) {
        int64_t off = g_.s_off[sid];
        if (g_.s_kind[sid]) {
            const uint32_t* w = g_.s_words.p + off;
            for (int32_t i = 0; i < W; ++i) out[i] |= w[i];
        } else {
            const int32_t* ids = g_.s_ids.p + off;
            for (int32_t i = 0, n = g_.s_len[sid]; i < n; ++i) out[ids[i] >> 5] |= 1u << (ids[i] & 31);
        }
    }
    lap(2);
    for (int32_t i = 0; i < W; ++i) out[i] &= g_.v_allowed[i];
    if (eos_ok(st_, s))
        for (size_t k = 0; k < g_.v_eos.size(); ++k) out[g_.v_eos[k] >> 5] |= 1u << (g_.v_eos[k] & 31);
    lap(3);
}

bool Matcher::fill_mask(uint32_t* out, Scratch& s, int64_t* phase_ns) {
    if (guarded(s, "a mask", false, [&](Scratch&) {
            mask(out, s, phase_ns);
            return true;
        }))
        return true;
    std::memset(out, 0, size_t(g_.n_words) * 4);  // in error: only EOS, so a batch's sequence can end
    for (size_t k = 0; k < g_.v_eos.size(); ++k) out[g_.v_eos[k] >> 5] |= 1u << (g_.v_eos[k] & 31);
    return false;
}

bool Matcher::eos_ok(const MState& m, Scratch& s) {
    Parser p(g_, pools_, s.pools, s.budget);
    for (const Live& lv : m.live) {
        int32_t f = g_.c_final[lv.cfg];
        if (f == -2) continue;
        PState st;
        if (!run_pending(p, m.parser, lv.pending, st)) continue;
        if (f >= 0) {
            if (f == g_.indent_label) {
                // a NEWLINE with no line break (a comment ending the text): lark's Indenter drops it inside
                // brackets before reading its indentation, and fails on it outside them
                if (lv.acc < 0 && st.parens == 0) continue;
                if (!p.step(st, g_.nl_term, lv.acc)) continue;
            } else if (!p.step(st, g_.label_term[f], 0)) {
                continue;
            }
        }
        if (p.accepts_end(st)) return true;
    }
    return false;
}

int Matcher::is_accepting() {
    return guarded(thread_scratch(), "is_accepting", -1, [&](Scratch& s) {
        if (st_.finished) return 0;
        begin_call(s);
        return eos_ok(st_, s) ? 1 : 0;
    });
}

bool Matcher::step_token(const MState& from, int32_t token, MState& to, Scratch& s) {
    if (g_.is_eos(token)) {
        if (!eos_ok(from, s)) return false;
        to.parser = from.parser;
        to.live.clear();
        to.finished = true;
        return true;
    }
    int64_t lo = g_.v_bytes_off[token], hi = g_.v_bytes_off[token + 1];
    if (lo == hi) return false;
    Parser p(g_, pools_, s.pools, s.budget);
    Lexer lexer(g_);
    std::vector<Live> next;
    // memo of parser questions: (pending + emitted, entered set) -> answer
    std::vector<std::pair<std::vector<int32_t>, std::pair<int32_t, bool>>> memo;
    for (const Live& lv : from.live) {
        lexer.run(lv.cfg, g_.v_bytes.p + lo, size_t(hi - lo), lv.acc, s.ends);
        for (LexEnd& e : s.ends) {
            if (!g_.c_entered_valid[e.cfg]) continue;
            std::vector<int32_t> seq = lv.pending;
            seq.insert(seq.end(), e.emitted.begin(), e.emitted.end());
            int64_t ent_lo = g_.c_entered_off[e.cfg], ent_hi = g_.c_entered_off[e.cfg + 1];
            int32_t ent_key = e.cfg;  // entered set identified by its config's range
            bool ok = false, found = false;
            for (auto& [k, v] : memo)
                if (v.first == ent_key && k == seq) {
                    ok = v.second;
                    found = true;
                    break;
                }
            if (!found) {
                ++parser_checks;
                PState st;
                if (run_pending(p, from.parser, seq, st)) {
                    if (ent_lo == ent_hi) ok = true;
                    for (int64_t k = ent_lo; !ok && k < ent_hi; ++k) {
                        int32_t lab = g_.c_entered[k];
                        if (lab < 0) ok = true;
                        else if (lab == g_.indent_label) ok = p.accepts_newline_after(st);
                        else {
                            PState t = st;
                            ok = p.step(t, g_.label_term[lab], 0);
                        }
                    }
                }
                memo.push_back({seq, {ent_key, ok}});
            }
            if (!ok) continue;
            Live nl{e.cfg, std::move(seq), e.acc};
            if (std::find(next.begin(), next.end(), nl) == next.end()) next.push_back(std::move(nl));
        }
    }
    if (next.empty()) return false;
    // commit what every live configuration agrees on
    size_t k = 0;
    while (true) {
        bool same = true;
        for (const Live& lv : next)
            if (lv.pending.size() <= k || lv.pending[k] != next[0].pending[k]) {
                same = false;
                break;
            }
        if (!same) break;
        ++k;
    }
    PState committed = from.parser;
    if (k) {
        std::vector<int32_t> head(next[0].pending.begin(), next[0].pending.begin() + k);
        PState st;
        run_pending(p, from.parser, head, st);
        committed = materialize(st, pools_, s.pools);
        for (Live& lv : next) lv.pending.erase(lv.pending.begin(), lv.pending.begin() + k);
    }
    to.parser = committed;
    to.live = std::move(next);
    to.finished = false;
    return true;
}

int Matcher::advance(int32_t token) {
    return guarded(thread_scratch(), "an advance", 3, [&](Scratch& s) {
        if (st_.finished) return 2;
        begin_call(s);
        MState to;
        if (!step_token(st_, token, to, s)) return 1;
        push_history(std::move(st_));
        st_ = std::move(to);
        return 0;
    });
}

int64_t Matcher::advance_many(const int32_t* tokens, size_t n) {
    return guarded(thread_scratch(), "an advance", int64_t(-1), [&](Scratch& s) -> int64_t {
        PoolMark mark(pools_);  // nothing changes when a token is refused
        MState cur = st_;
        std::vector<MState> states;
        for (size_t i = 0; i < n; ++i) {
            begin_call(s);
            MState to;
            if (cur.finished || !step_token(cur, tokens[i], to, s)) return int64_t(i);
            states.push_back(std::move(cur));
            cur = std::move(to);
        }
        mark.keep = true;
        for (auto& m : states) push_history(std::move(m));
        st_ = std::move(cur);
        return int64_t(n);
    });
}

int64_t Matcher::validate(const int32_t* tokens, size_t n) {
    return guarded(thread_scratch(), "a validate", int64_t(-1), [&](Scratch& s) -> int64_t {
        PoolMark mark(pools_);  // nothing of a validation stays committed
        MState cur = st_;
        size_t i = 0;
        for (; i < n; ++i) {
            begin_call(s);
            MState to;
            if (cur.finished || !step_token(cur, tokens[i], to, s)) break;
            cur = std::move(to);
        }
        return int64_t(i);
    });
}

bool Matcher::rollback(size_t n) {
    if (error_ || n > history_.size()) return false;
    if (n) {
        for (size_t k = history_.size() - n; k < history_.size(); ++k) history_bytes_ -= state_bytes(history_[k]);
        st_ = std::move(history_[history_.size() - n]);
        history_.resize(history_.size() - n);
    }
    return true;
}

}  // namespace cad
