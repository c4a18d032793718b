// Serving processes' malloc settings (malloc_policy.h).
#include "common/malloc_policy.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>

#include "common/log.h"

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

MallocPolicyResult ApplyServingMallocPolicy() {
  const char* petal = std::getenv("PETAL_MMAP_THRESHOLD");
  const char* glibc = std::getenv("MALLOC_MMAP_THRESHOLD_");
  const size_t t = ServingMmapThreshold(petal, glibc, cpu_engine.load(std::memory_order_relaxed));
  if (t == 0 && petal != nullptr && *petal != '\0' && std::string(petal) != "0" &&
      (glibc == nullptr || *glibc == '\0')) {
    return {false, "PETAL_MMAP_THRESHOLD=" + std::string(petal) +
                       " is not a byte count of at most 33554432: glibc's default (dynamic) mmap "
                       "threshold"};
  }
  if (t == 0) return {true, "glibc's default (dynamic) mmap threshold"};
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(t)) != 1)
    return {false, "mallopt(M_MMAP_THRESHOLD) failed: glibc's default (dynamic) mmap threshold"};
  return {true, "mmap threshold " + std::to_string(t) + " bytes"};
}

void ApplyServingMallocPolicyAndLog() {
  const MallocPolicyResult r = ApplyServingMallocPolicy();
  Log(r.ok ? "info" : "warn", "malloc", {{"policy", r.line}});
}

}  // namespace petal
