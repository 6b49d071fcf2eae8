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

// The same use for long contents (token sets as bitsets, thousands of words): four independent
// multiply chains over pairs of values, so the work is not one serial chain of multiplications.
template <class T>
inline uint64_t hash_long(const T* p, size_t n, uint64_t seed) {
    static_assert(sizeof(T) == 4, "32-bit values");
    constexpr uint64_t M = 0x9E3779B97F4A7C15ull;
    uint64_t h0 = seed, h1 = seed ^ 0x5555555555555555ull, h2 = seed ^ 0xAAAAAAAAAAAAAAAAull, h3 = ~seed;
    auto pair = [&](size_t i) { return uint64_t(uint32_t(p[i])) | uint64_t(uint32_t(p[i + 1])) << 32; };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h0 = (h0 ^ pair(i)) * M, h1 = (h1 ^ pair(i + 2)) * M;
        h2 = (h2 ^ pair(i + 4)) * M, h3 = (h3 ^ pair(i + 6)) * M;
        h0 ^= h0 >> 29, h1 ^= h1 >> 29, h2 ^= h2 >> 29, h3 ^= h3 >> 29;
    }
    uint64_t h = fnv1a(p + i, n - i, h0 ^ (h1 * 31) ^ (h2 * 961) ^ (h3 * 29791));
    return (h ^ (h >> 32)) * M;
}

}  // namespace cad
