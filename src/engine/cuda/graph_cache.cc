#include "engine/cuda/graph_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

int BucketPolicy::PadTokens(int tokens) const {
  const int step = tokens <= threshold ? token_small : token_large;
  const int padded = (tokens + step - 1) / step * step;
  return std::min(std::max(padded, step > 0 ? std::min(step, max_tokens) : 1), max_tokens);
}

int BucketPolicy::PadSeqs(int seqs) const {
  int p = 1;
  while (p < seqs) p *= 2;
  return std::min(p, max_seqs);
}

int BucketPolicy::PadMaxLen(int max_len, int padded_tokens) const {
  int p = std::max(1, token_small);
  while (p < max_len) p *= 2;
  return std::min(p, padded_tokens);
}

GraphCache::~GraphCache() {
  for (auto& [k, e] : entries_) {
    if (e.exec) cudaGraphExecDestroy(e.exec);
  }
}

Status GraphCache::Run(Key key, cudaStream_t stream, const std::function<Status()>& forward) {
  if (!enabled_) {
    ++eager_runs_;
    return forward();
  }
  Entry& e = entries_[key];
  ++e.uses;
  if (e.exec) {
    Touch(key, e);
    ++replays_;
    PETAL_CUDA_CHECK(cudaGraphLaunch(e.exec, stream));
    return Status::Ok();
  }
  if (e.uses == 1) {  // warm-up: eager
    ++eager_runs_;
    return forward();
  }
  Status s = Capture(e, stream, forward);
  if (!s.ok()) {
    // A configuration that cannot be captured keeps running eagerly; the error is reported once.
    ++capture_failures_;
    std::fprintf(stderr,
                 "petal: graph capture for (%d seqs, %d tokens, longest %d) failed, running "
                 "eagerly: %s\n",
                 key.seqs, key.tokens, key.max_len, s.ToString().c_str());
    e.uses = -(1 << 30);  // never try again
    ++eager_runs_;
    return forward();
  }
  lru_.push_front(key);
  e.lru = lru_.begin();
  EvictIfNeeded();
  ++replays_;
  PETAL_CUDA_CHECK(cudaGraphLaunch(e.exec, stream));
  return Status::Ok();
}

Status GraphCache::Capture(Entry& e, cudaStream_t stream, const std::function<Status()>& forward) {
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
  const cudaError_t inst = cudaGraphInstantiate(&e.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess) {
    e.exec = nullptr;
    return CudaError(inst, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  ++captures_;
  capture_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

void GraphCache::Touch(Key key, Entry& e) { lru_.splice(lru_.begin(), lru_, e.lru); }

void GraphCache::EvictIfNeeded() {
  while (static_cast<int>(lru_.size()) > max_graphs_) {
    const Key victim = lru_.back();
    lru_.pop_back();
    Entry& v = entries_[victim];
    cudaGraphExecDestroy(v.exec);
    v.exec = nullptr;
    v.uses = 1;  // next use captures again
    ++evictions_;
  }
}

std::map<std::string, double> GraphCache::Stats() const {
  return {{"graph_eager_runs", double(eager_runs_)},
          {"graph_captures", double(captures_)},
          {"graph_replays", double(replays_)},
          {"graph_evictions", double(evictions_)},
          {"graph_capture_failures", double(capture_failures_)},
          {"graphs_cached", double(lru_.size())},
          {"graph_capture_ms_total", capture_ms_}};
}

}  // namespace petal::cuda
