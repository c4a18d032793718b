// L2 prefetch of weights one GEMM ahead: at batch 1 the dense layers are bound by the latency of
// reading their weights from HBM (a 12 MB GEMM at M = 128 runs at ~1/4 of HBM bandwidth), so a
// second stream pulls the NEXT GEMM's weights into L2 while the current one computes; the next
// GEMM then reads them at L2 latency. Nothing is written: the prefetch is a hint and cannot change
// any result. Thread-safety: LaunchL2Prefetch is stateless; an L2Prefetcher belongs to one engine
// thread (its stream and events are used only from the thread that runs the forward pass).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "common/status.h"

namespace petal::cuda {

// Enqueues a prefetch of [ptr, ptr + bytes) into L2 on `stream` (sm_90: TMA bulk prefetch in
// 32 KiB pieces; older GPUs: one prefetch.global.L2 per 128-byte line). Graph-capturable.
Status LaunchL2Prefetch(const void* ptr, size_t bytes, cudaStream_t stream);

// How many GEMMs ahead the prefetcher reads: PETAL_L2_PREFETCH (0 = off, at most 4), default 0
// (off: not yet measured on the H200).
int L2PrefetchAhead();
// Batches of at most this many tokens prefetch (larger ones are compute-bound):
// PETAL_L2_PREFETCH_MAX_TOKENS, default 1024.
int L2PrefetchMaxTokens();

// A side stream that prefetches the weights of GEMM j + ahead when GEMM j is enqueued. Fork and
// join use events, so the same calls work eagerly and while the main stream is being captured
// (the side stream joins the capture through the first event it waits on).
class L2Prefetcher {
 public:
  struct Span {
    const void* ptr;
    size_t bytes;
  };
  L2Prefetcher() = default;
  ~L2Prefetcher();
  L2Prefetcher(const L2Prefetcher&) = delete;
  L2Prefetcher& operator=(const L2Prefetcher&) = delete;

  // ahead = 0 turns prefetching off (no stream is created). Call once, before any Begin.
  Status Init(int ahead);
  int ahead() const { return ahead_; }

  // The weights the forward pass's GEMMs read, in the order they run (set once, at load).
  void SetSpans(std::vector<Span> spans) { spans_ = std::move(spans); }
  // Starts one forward pass; enabled = false makes every call of this pass a no-op (e.g. batches
  // too large to gain, or a path whose GEMMs read other weights).
  void Begin(bool enabled);
  // Called just before GEMM j is enqueued on `main`: prefetches span j + ahead (and, for j = 0,
  // spans 0 .. ahead as well) on the side stream, after the work already on `main`. Of a span
  // larger than a quarter of L2 (the 4b shape's MLP) only that first quarter is prefetched, so
  // the prefetch never evicts the weights the current GEMM is reading.
  Status BeforeGemm(size_t j, cudaStream_t main);
  // Ends the pass: `main` waits for the side stream (required before a capture ends).
  Status End(cudaStream_t main);

 private:
  Status Fork(cudaStream_t main);
  int ahead_ = 0;
  size_t piece_cap_ = 0;  // bytes prefetched of one span at most: L2 size / 4
  bool active_ = false, forked_ = false;
  std::vector<Span> spans_;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace petal::cuda
