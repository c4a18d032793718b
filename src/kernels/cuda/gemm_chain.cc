// ChainTimer (gemm_chain.h): graph-captured chains of one GEMM candidate over copies of its
// weights, for the tuner.
#include "kernels/cuda/gemm_chain.h"

#include <algorithm>
#include <string>

#include "common/env.h"

namespace petal::cuda {
namespace {

constexpr int kMaxCopies = 64;
constexpr int kMinLaunches = 8;

size_t WeightBytes(const GemmParams& p) {
  const size_t elems = static_cast<size_t>(p.n) * p.k;
  return p.fp8() ? elems : elems * sizeof(__nv_bfloat16);
}

const void* Weights(const GemmParams& p) {
  return p.fp8() ? static_cast<const void*>(p.w8) : static_cast<const void*>(p.w);
}

void SetWeights(GemmParams& q, const void* w) {
  if (q.fp8())
    q.w8 = static_cast<const __nv_fp8_e4m3*>(w);
  else
    q.w = static_cast<const __nv_bfloat16*>(w);
}

}  // namespace

int ChainTuningMaxM(int option) {
  const auto m = EnvNonNegative("PETAL_GEMM_TUNE_CHAIN");
  return m ? static_cast<int>(std::min<long long>(*m, 1 << 30)) : option;
}

Status ChainTimer::Prepare(const GemmParams& p, size_t pool_bytes, cudaStream_t stream) {
  if (pool_.get() == nullptr || pool_.bytes() < pool_bytes)
    PETAL_RETURN_IF_ERROR(pool_.Allocate(pool_bytes));
  const size_t bytes = WeightBytes(p);
  stride_ = (bytes + 255) / 256 * 256;
  copies_ = 2 * stride_ > pool_.bytes()
                ? 0
                : static_cast<int>(std::min<size_t>(kMaxCopies, pool_.bytes() / stride_));
  for (int c = 0; c < copies_; ++c)
    PETAL_CUDA_CHECK(cudaMemcpyAsync(pool_.get() + c * stride_, Weights(p), bytes,
                                     cudaMemcpyDeviceToDevice, stream));
  launches_ = std::max(copies_, kMinLaunches);
  return Status::Ok();
}

StatusOr<bool> ChainTimer::Enqueue(const Launch& launch, const GemmParams& p, int timed,
                                   cudaStream_t stream) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. the legacy default stream, which cannot capture
    return false;
  }
  Status launched = Status::Ok();
  for (int r = 0; r < launches_ && launched.ok(); ++r) {
    GemmParams q = p;
    if (copies_ > 0) SetWeights(q, pool_.get() + (r % copies_) * stride_);
    launched = launch(q);
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!launched.ok() || ended != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // a refused launch or an invalidated capture is not sticky
    return false;
  }
  Entry e;
  const cudaError_t inst = cudaGraphInstantiate(&e.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  e.events.assign(2 * static_cast<size_t>(timed), nullptr);
  entries_.push_back(std::move(e));
  Entry& mine = entries_.back();
  for (cudaEvent_t& ev : mine.events) PETAL_CUDA_CHECK(cudaEventCreate(&ev));
  PETAL_CUDA_CHECK(cudaGraphLaunch(mine.exec, stream));  // warm-up
  for (int t = 0; t < timed; ++t) {
    PETAL_CUDA_CHECK(cudaEventRecord(mine.events[2 * t], stream));
    PETAL_CUDA_CHECK(cudaGraphLaunch(mine.exec, stream));
    PETAL_CUDA_CHECK(cudaEventRecord(mine.events[2 * t + 1], stream));
  }
  return true;
}

StatusOr<std::vector<float>> ChainTimer::Collect() {
  std::vector<float> out;
  Status s = Status::Ok();
  for (const Entry& e : entries_) {
    std::vector<float> us;
    for (size_t t = 0; t + 1 < e.events.size() && s.ok(); t += 2) {
      float ms = 0.f;
      const cudaError_t err = cudaEventElapsedTime(&ms, e.events[t], e.events[t + 1]);
      if (err != cudaSuccess) s = Internal(std::string("ChainTimer: ") + cudaGetErrorString(err));
      us.push_back(ms * 1000.f / static_cast<float>(launches_));
    }
    std::sort(us.begin(), us.end());
    out.push_back(us.empty() ? -1.f : us[us.size() / 2]);
  }
  Release();
  if (!s.ok()) return s;
  return out;
}

void ChainTimer::Release() {
  for (Entry& e : entries_) {
    for (cudaEvent_t ev : e.events)
      if (ev != nullptr) cudaEventDestroy(ev);
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
  }
  entries_.clear();
}

}  // namespace petal::cuda
