#include "engine/cuda/graph_cache.h"

#include <chrono>
#include <cstdio>

#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

GraphCache::~GraphCache() {
  for (auto& [k, exec] : execs_) cudaGraphExecDestroy(exec);
}

Status GraphCache::Run(Key key, cudaStream_t stream, FunctionRef<Status()> forward) {
  switch (policy_.Next(key)) {
    case GraphPolicy::Action::kEager:
      return forward();
    case GraphPolicy::Action::kReplay:
      PETAL_CUDA_CHECK(cudaGraphLaunch(execs_.at(key), stream));
      return Status::Ok();
    case GraphPolicy::Action::kCapture:
      break;
  }
  cudaGraphExec_t exec = nullptr;
  const Status s = Capture(&exec, stream, forward);
  for (const Key& victim : policy_.Captured(key, s.ok())) {
    cudaGraphExecDestroy(execs_.at(victim));
    execs_.erase(victim);
  }
  if (!s.ok()) {
    // The policy keeps this shape eager from now on; the error is reported once.
    std::fprintf(stderr,
                 "petal: graph capture for (%d seqs, %d tokens, longest %d) failed, running "
                 "eagerly from now on: %s\n",
                 key.seqs, key.tokens, key.max_len, s.ToString().c_str());
    return forward();
  }
  execs_[key] = exec;
  PETAL_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return Status::Ok();
}

Status GraphCache::Capture(cudaGraphExec_t* exec, cudaStream_t stream,
                           FunctionRef<Status()> forward) {
  const auto t0 = std::chrono::steady_clock::now();
  PETAL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  Status fs = forward();
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!fs.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return fs;
  }
  if (end != cudaSuccess) return CudaError(end, "cudaStreamEndCapture", __FILE__, __LINE__);
  const cudaError_t inst = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    *exec = nullptr;
    return CudaError(inst, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  capture_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

std::map<std::string, double> GraphCache::Stats() const {
  auto st = policy_.Stats();
  st["graph_capture_ms_total"] = capture_ms_;
  return st;
}

}  // namespace petal::cuda
