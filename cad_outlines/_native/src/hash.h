// FNV-1a over 32-bit values: the hash of the native core's interning tables. Equal contents
// are always compared after it, so it only spreads the buckets.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cad {

constexpr uint64_t FNV_OFFSET = 1469598103934665603ull, FNV_PRIME = 1099511628211ull;

template <class T>
inline uint64_t fnv1a(const T* p, size_t n, uint64_t h = FNV_OFFSET) {
    static_assert(sizeof(T) == 4, "32-bit values");
    for (size_t i = 0; i < n; ++i) h = (h ^ uint32_t(p[i])) * FNV_PRIME;
    return h;
}

}  // namespace cad
