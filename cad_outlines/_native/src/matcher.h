// One sequence's constrained-decoding state, and everything a decode step does with it:
// the mask (row-trie walk + union into a packed bitmask), advance / advance_many /
// validate / rollback / fork, EOS. Mirrors engine/reference_matcher.py exactly.
#pragma once

#include <cstdint>
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
    std::vector<uint32_t> set_stamp, lab_stamp;
    std::vector<uint8_t> lab_val;
    uint32_t stamp = 0, lstamp = 0;
    std::vector<int32_t> passing;
    std::vector<LexEnd> ends;
    void begin(const Grammar& g);
};
Scratch& thread_scratch();

class Matcher {
public:
    explicit Matcher(const Grammar& g);
    Matcher(const Matcher&) = default;

    // Legal next tokens as packed bits into out[0 .. n_words) (llguidance's layout).
    void fill_mask(uint32_t* out, Scratch& s, int64_t* phase_ns = nullptr);
    // 0 = consumed; 1 = not allowed here (nothing changed); 2 = after EOS.
    int advance(int32_t token);
    // Index of the first token not allowed (n if all are), consuming all only if all are.
    size_t advance_many(const int32_t* tokens, size_t n);
    size_t validate(const int32_t* tokens, size_t n);
    bool rollback(size_t n);
    bool is_accepting();
    bool is_finished() const { return st_.finished; }
    size_t consumed() const { return history_.size(); }
    int64_t parser_checks = 0;
    const MState& state() const { return st_; }
    const Grammar& grammar() const { return g_; }

private:
    bool step_token(const MState& from, int32_t token, MState& to, Scratch& s);
    bool eos_ok(const MState& st, Scratch& s);
    void walk(Parser& p, int32_t node, const PState& st, int32_t acc, bool first, Scratch& s);
    bool run_pending(Parser& p, const PState& from, const std::vector<int32_t>& labels, PState& out) const;

    const Grammar& g_;
    Pools pools_;
    MState st_;
    std::vector<MState> history_;
};

}  // namespace cad
