// Serving processes' malloc settings (malloc_policy.h).
#include "common/malloc_policy.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>

namespace petal {
namespace {

constexpr size_t kServingMmapThreshold = size_t{256} << 10;
std::atomic<bool> cpu_engine{false};

}  // namespace

size_t ServingMmapThreshold(const char* petal_env, const char* glibc_env, bool cpu) {
  if (glibc_env != nullptr && *glibc_env != '\0') return 0;
  if (petal_env != nullptr && *petal_env != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(petal_env, &end, 10);
    // glibc caps the threshold at 32 MiB (HEAP_MAX_SIZE / 2 on 64-bit); junk means "leave it".
    if (end == petal_env || *end != '\0' || v > (size_t{32} << 20)) return 0;
    return static_cast<size_t>(v);
  }
  return cpu ? 0 : kServingMmapThreshold;
}

void NoteCpuEngine() { cpu_engine.store(true, std::memory_order_relaxed); }

std::string ApplyServingMallocPolicy() {
  const size_t t = ServingMmapThreshold(std::getenv("PETAL_MMAP_THRESHOLD"),
                                        std::getenv("MALLOC_MMAP_THRESHOLD_"),
                                        cpu_engine.load(std::memory_order_relaxed));
  if (t == 0) return "glibc's default (dynamic) mmap threshold";
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(t)) != 1) return "mallopt(M_MMAP_THRESHOLD) failed";
  return "mmap threshold " + std::to_string(t) + " bytes";
}

}  // namespace petal
