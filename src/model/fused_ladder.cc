// TuneFusedLadder and the ladder helpers (fused_ladder.h).
#include "model/fused_ladder.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {
namespace {

// A fused kernel must be this much faster than the unfused pair to be used at a batch size.
constexpr double kMinGain = 0.97;

// Mean milliseconds of one call of `f` over 5 runs after 2 warm-ups, on the legacy stream.
StatusOr<double> TimeMs(const std::function<Status()>& f) {
  cudaEvent_t start = nullptr, stop = nullptr;
  PETAL_CUDA_CHECK(cudaEventCreate(&start));
  PETAL_CUDA_CHECK(cudaEventCreate(&stop));
  Status st = Status::Ok();
  for (int i = 0; i < 2 && st.ok(); ++i) st = f();
  cudaEventRecord(start, nullptr);
  for (int i = 0; i < 5 && st.ok(); ++i) st = f();
  cudaEventRecord(stop, nullptr);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  PETAL_RETURN_IF_ERROR(st);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return ms / 5.0;
}

}  // namespace

int FusedConfigFor(const std::vector<FusedRung>& rungs, int tokens) {
  for (const FusedRung& r : rungs)
    if (tokens <= r.max_tokens) return r.config;
  return -1;
}

std::string DescribeRungs(const std::vector<FusedRung>& rungs,
                          const std::function<std::string(int)>& name) {
  std::string s;
  for (const FusedRung& r : rungs)
    s += (s.empty() ? "" : ", ") + std::string("<=") + std::to_string(r.max_tokens) + " " +
         (r.config >= 0 ? name(r.config) : std::string("unfused"));
  return s.empty() ? "unfused" : s;
}

StatusOr<std::vector<FusedRung>> TuneFusedLadder(int max_tokens, int configs, int mode,
                                                 const std::function<Status(int)>& unfused,
                                                 const std::function<Status(int, int)>& fused,
                                                 std::string* table) {
  std::vector<int> ladder;
  for (int m : {128, 512, 2048, 8192, 32768})
    if (m < max_tokens) ladder.push_back(m);
  ladder.push_back(max_tokens);
  const bool timed = mode < 0;
  const int from = timed ? -mode : mode;
  std::vector<FusedRung> rungs;
  for (int m : ladder) {
    FusedRung r{m, -1};
    if (m < from) {
      rungs.push_back(r);
      continue;
    }
    double best = 0;
    for (int k = 0; k < configs; ++k) {
      PETAL_ASSIGN_OR_RETURN(double t, TimeMs([&] { return fused(m, k); }));
      if (k == 0 || t < best) best = t, r.config = k;
    }
    double base = 0;
    if (timed) {
      PETAL_ASSIGN_OR_RETURN(base, TimeMs([&] { return unfused(m); }));
      if (!(best < kMinGain * base)) r.config = -1;
    }
    rungs.push_back(r);
    *table += (table->empty() ? "" : "; ") + std::string("m<=") + std::to_string(m) + ": " +
              std::to_string(best).substr(0, 6) +
              (timed ? " vs " + std::to_string(base).substr(0, 6) : "") + " ms";
  }
  return rungs;
}

}  // namespace petal::cuda
