// Whole-batch masks: one call computes every sequence's mask in a fixed pool of worker
// threads (sized to the cores), with the GIL released by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace cad {

// Run fn(i) for i in [0, n) on the pool and the calling thread; returns when all are done.
// The first exception thrown by fn is rethrown here.
void parallel_for(size_t n, const std::function<void(size_t)>& fn);
size_t pool_threads();

}  // namespace cad
