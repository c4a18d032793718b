// An optional profiler window over the CUDA engine's forward passes, for Nsight Compute / Systems
// runs started with --profile-from-start off (scripts/gpu/steps/ncu_bounds.sh): with
// PETAL_PROFILE_FORWARDS="skip,count" the profiler starts before forward pass number `skip`
// (0-based, warm-up passes included) and stops after `count` passes, so the tuner's and the
// warm-up's kernels stay out of the profile. Unset or malformed: nothing is ever called.
// Thread-safety: one ProfileWindow per engine, used by the engine's thread only.
#pragma once

#include <cuda_profiler_api.h>

#include <cstdio>
#include <cstdlib>

namespace petal::cuda {

class ProfileWindow {
 public:
  ProfileWindow() {
    const char* v = std::getenv("PETAL_PROFILE_FORWARDS");
    long skip = -1, count = 0;
    if (v != nullptr && std::sscanf(v, "%ld,%ld", &skip, &count) == 2 && skip >= 0 && count > 0) {
      skip_ = skip;
      count_ = count;
    }
  }
  // Around one forward pass.
  void Before() {
    if (skip_ >= 0 && n_ == skip_) (void)cudaProfilerStart();
  }
  void After() {
    if (skip_ >= 0 && n_ == skip_ + count_ - 1) (void)cudaProfilerStop();
    ++n_;
  }

 private:
  long skip_ = -1, count_ = 0, n_ = 0;
};

}  // namespace petal::cuda
