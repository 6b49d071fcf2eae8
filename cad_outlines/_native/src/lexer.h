// The byte-level lexer (lark's basic-lexer rules) run over a token's bytes from a store
// configuration: the native form of engine/lexer.py's Lexer.run. A configuration is
// (owner, state, constraint runs); owner -1 is "between lexemes". States are global.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar.h"

namespace cad {

constexpr int32_t BOUNDARY = -1;
constexpr int32_t NO_LINE_BREAK = -1;

struct LexCfg {
    int32_t owner = BOUNDARY;
    int32_t state = 0;
    std::vector<int32_t> cons;  // sorted global states
    bool operator==(const LexCfg& o) const { return owner == o.owner && state == o.state && cons == o.cons; }
};

struct LexEnd {
    int32_t cfg;                   // store configuration id
    std::vector<int32_t> emitted;  // labels (NEWLINE as INDENT_BASE + 2 * indent + 1)
    int32_t acc;                   // indentation of a NEWLINE lexeme in progress
};

class Lexer {
public:
    explicit Lexer(const Grammar& g) : g_(g) {}
    // Every (store config, emitted labels, indentation) reachable by reading `data` from
    // store config `cfg` with indentation `acc`. Throws if an end is not a store config.
    void run(int32_t cfg, const uint8_t* data, size_t n, int32_t acc, std::vector<LexEnd>& out) const;
    // One byte from a configuration: (successor, label ended by this byte or -1), as
    // engine/lexer.py's Lexer.step; only the l_* arrays of the grammar are read.
    void step(const LexCfg& cfg, int b, std::vector<std::pair<LexCfg, int32_t>>& out) const;
    // The rest of step once the byte is known to be read: `base` is the configuration's
    // constraint runs after byte b (advance_cons), s its lexeme's state after b (owner not
    // BOUNDARY). The successors depend on nothing else.
    void step_after(int32_t owner, int32_t s, int b, std::vector<int32_t>&& base,
                    std::vector<std::pair<LexCfg, int32_t>>& out) const;
    // Constraint runs after byte b (sorted global states); false if one of them matches.
    bool advance_cons(const std::vector<int32_t>& cons, int b, std::vector<int32_t>& out) const;

private:
    struct Front {
        LexCfg c;
        std::vector<int32_t> emitted;
        int32_t acc;
    };
    void after(int32_t i, int32_t s, std::vector<int32_t>&& cons, std::vector<std::pair<LexCfg, int32_t>>& out) const;
    std::vector<int32_t> ended_cons(int32_t s, const std::vector<int32_t>& cons) const;
    const Grammar& g_;
};

}  // namespace cad
