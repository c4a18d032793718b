// Host-side launch helpers shared by the op launchers in this folder: choosing the vector width
// from dims and pointer alignment, and thread counts for one-block-per-row kernels.
// Thread-safety: pure functions.
#pragma once

#include <initializer_list>
#include <string>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

// 8 (16-byte accesses) when every dim is a multiple of 8 and every non-null pointer is 16-byte
// aligned; otherwise 2 (4-byte accesses), which needs even dims and 4-byte alignment; 0 if not
// even that holds (caller reports InvalidArgument).
inline int ChooseVec(std::initializer_list<long long> dims,
                     std::initializer_list<const void*> ptrs) {
  bool vec8 = true;
  for (long long d : dims) {
    if (d % 2 != 0) return 0;
    if (d % 8 != 0) vec8 = false;
  }
  for (const void* p : ptrs) {
    if (p == nullptr) continue;
    if (!IsAligned(p, 4)) return 0;
    if (!IsAligned(p, 16)) vec8 = false;
  }
  return vec8 ? 8 : 2;
}

// Threads for a block that owns one row of `dim` values, kVec per thread per step: enough to
// cover the row in one step, a multiple of 32 (BlockSum needs full warps), at most 1024.
inline int RowThreads(int dim, int vec) {
  int t = (dim / vec + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > 1024) t = 1024;
  return t;
}

// Largest row (fp32 values staged in shared memory) the norm kernels accept without raising the
// dynamic shared-memory limit.
inline constexpr int kMaxNormDim = 12288;

inline Status BadArg(const char* op, const std::string& what) {
  return InvalidArgument(std::string(op) + ": " + what);
}

}  // namespace petal::cuda
