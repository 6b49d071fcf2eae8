#include "grammar.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace cad {

// A configuration's constraint runs are a set: the lexer produces them in the order it advanced
// them (duplicates included), the store may hold them sorted, so the key is the sorted set.
std::string config_key(int32_t owner, int32_t state, const int32_t* cons, size_t n_cons) {
    std::vector<int32_t> runs(cons, cons + n_cons);
    std::sort(runs.begin(), runs.end());
    runs.erase(std::unique(runs.begin(), runs.end()), runs.end());
    std::string key;
    key.resize((2 + runs.size()) * sizeof(int32_t));
    char* p = key.data();
    std::memcpy(p, &owner, 4);
    std::memcpy(p + 4, &state, 4);
    if (!runs.empty()) std::memcpy(p + 8, runs.data(), runs.size() * 4);
    return key;
}

void Grammar::index_configs() const {
    config_ids_.reserve(n_configs() * 2);
    for (size_t q = 0; q < n_configs(); ++q) {
        int64_t lo = c_cons_off[q], hi = c_cons_off[q + 1];
        config_ids_.emplace(config_key(c_owner[q], c_state[q], c_cons.p + lo, size_t(hi - lo)), int32_t(q));
    }
}

int32_t Grammar::find_config(int32_t owner, int32_t state, const int32_t* cons, size_t n_cons) const {
    std::call_once(*config_ids_once_, [this] { index_configs(); });
    auto it = config_ids_.find(config_key(owner, state, cons, n_cons));
    return it == config_ids_.end() ? -1 : it->second;
}

}  // namespace cad
