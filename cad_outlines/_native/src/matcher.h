// One sequence's constrained-decoding state, and everything a decode step does with it:
// the mask (row-trie walk + union into a packed bitmask), advance / advance_many /
// validate / rollback / fork, EOS. Mirrors engine/reference_matcher.py exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grammar.h"
#include "lexer.h"
#include "parser.h"

namespace cad {

struct Live {
    int32_t cfg;
    std::vector<int32_t> pending;  // labels completed beyond the committed parser
    int32_t acc;                   // indentation of a NEWLINE lexeme in progress
    bool operator==(const Live& o) const { return cfg == o.cfg && acc == o.acc && pending == o.pending; }
};

struct MState {
    PState parser;
    std::vector<Live> live;
    bool finished = false;
};

// Per-thread working memory, reused across calls (never shared between threads).
struct Scratch {
    Pools pools;
    Budget budget;
    std::vector<uint32_t> set_stamp, lab_stamp;
    std::vector<uint8_t> lab_val;
    uint32_t stamp = 0, lstamp = 0;
    std::vector<int32_t> passing;
    std::vector<LexEnd> ends;
    void begin(const Grammar& g);
    void release();  // give the arena's memory back (after a call that blew up)
};
Scratch& thread_scratch();

// What one matcher may spend (Limits' runtime fields; INT64_MAX: unbounded).
struct MatcherLimits {
    int64_t max_reductions = INT64_MAX;  // parser reductions in one mask, or one token of an advance / validate
    int64_t max_depth = INT64_MAX;       // parser stack depth
    int64_t max_bytes = INT64_MAX;       // committed stacks + history + one call's scratch arena
};

// Why a matcher stopped: the limit (a Limits field), the value reached, the limit's value.
struct MatcherError {
    std::string limit, what;
    int64_t value = 0, maximum = 0;
};

// Every public call spends within `limits`; exceeding one (or running out of memory) puts the
// matcher into a sticky error state: the call and every later one refuse (a mask then allows
// only EOS), and `error()` says why. Nothing the failing call began is committed.
class Matcher {
public:
    explicit Matcher(const Grammar& g, MatcherLimits limits = {});
    Matcher(const Matcher&) = default;

    // Legal next tokens as packed bits into out[0 .. n_words) (llguidance's layout);
    // false = the matcher is in error (the mask allows only EOS).
    bool fill_mask(uint32_t* out, Scratch& s, int64_t* phase_ns = nullptr);
    // 0 = consumed; 1 = not allowed here (nothing changed); 2 = after EOS; 3 = in error.
    int advance(int32_t token);
    // Index of the first token not allowed (n if all are), consuming all only if all are; -1 = in error.
    int64_t advance_many(const int32_t* tokens, size_t n);
    int64_t validate(const int32_t* tokens, size_t n);
    bool rollback(size_t n);  // false: more than consumed, or in error
    int is_accepting();       // 1 / 0; -1 = in error
    const std::optional<MatcherError>& error() const { return error_; }
    size_t committed_bytes() const;
    bool is_finished() const { return st_.finished; }
    size_t consumed() const { return history_.size(); }
    int64_t parser_checks = 0;
    const MState& state() const { return st_; }
    const Grammar& grammar() const { return g_; }

private:
    void begin_call(Scratch& s) const;
    void fail(const char* limit, int64_t value, int64_t maximum, const char* what, Scratch& s);
    template <class F, class R>
    R guarded(Scratch& s, const char* what, R on_error, F&& body);
    void fill_eos_only(uint32_t* out) const;
    void mask(uint32_t* out, Scratch& s, int64_t* phase_ns);
    void push_history(MState&& m);
    bool step_token(const MState& from, int32_t token, MState& to, Scratch& s);
    bool eos_ok(const MState& st, Scratch& s);
    void walk(Parser& p, int32_t node, const PState& st, int32_t acc, bool first, Scratch& s);
    bool run_pending(Parser& p, const PState& from, const std::vector<int32_t>& labels, PState& out) const;

    const Grammar& g_;
    MatcherLimits limits_;
    Pools pools_;
    MState st_;
    std::vector<MState> history_;
    size_t history_bytes_ = 0;
    std::optional<MatcherError> error_;
};

}  // namespace cad
