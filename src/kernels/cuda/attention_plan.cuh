// The plan kernel of the ragged attention: one CTA turns cu_seqlens (device memory) into the work
// list the flash kernel walks, so no launch depends on host-side batch values. Internal header,
// included by attention_plan.cu (and by the CPU emulation test). Thread-safety: a kernel.
#pragma once

#include "kernels/cuda/attention_common.cuh"

namespace petal::cuda::attn {

constexpr int kPlanThreads = 1024;

namespace {  // internal linkage: the emulation test compiles its own host copy

// One block of kPlanThreads. Each pass handles kPlanThreads sequences: thread s counts the query
// tiles of sequence s, a block-wide inclusive scan (Hillis-Steele in shared memory) gives each
// sequence its place in the list, then the thread writes its tiles. For causal attention a
// sequence's tiles are listed last-first: later tiles see more keys, and the hardware starts
// CTAs roughly in list order, so heaviest-first evens the tail.
__global__ void __launch_bounds__(kPlanThreads)
    PlanKernel(const int32_t* __restrict__ cu_seqlens, const int32_t* __restrict__ num_seqs_ptr,
               int max_seqs, int max_tokens, int block_m, bool causal, int64_t max_items,
               int* __restrict__ count, WorkItem* __restrict__ items) {
  static __shared__ int scan[kPlanThreads];
  const int tid = static_cast<int>(threadIdx.x);
  int num_seqs = max_seqs;
  if (num_seqs_ptr != nullptr) num_seqs = min(max(*num_seqs_ptr, 0), max_seqs);

  int64_t base = 0;  // items written by earlier passes
  for (int first = 0; first < num_seqs; first += kPlanThreads) {
    const int s = first + tid;
    int begin = 0, len = 0, tiles = 0;
    if (s < num_seqs) {
      // Clamp malformed offsets so the flash kernel never reads outside [0, max_tokens).
      begin = min(max(cu_seqlens[s], 0), max_tokens);
      const int end = min(max(cu_seqlens[s + 1], begin), max_tokens);
      len = end - begin;
      tiles = (len + block_m - 1) / block_m;
    }
    scan[tid] = tiles;
    __syncthreads();
    for (int off = 1; off < kPlanThreads; off *= 2) {
      const int add = tid >= off ? scan[tid - off] : 0;
      __syncthreads();  // all reads of this step before any write
      scan[tid] += add;
      __syncthreads();
    }
    const int offset = scan[tid] - tiles;  // exclusive prefix
    const int total = scan[kPlanThreads - 1];
    for (int t = 0; t < tiles; ++t) {
      const int64_t idx = base + offset + t;
      if (idx >= max_items) break;
      const int tile = causal ? tiles - 1 - t : t;
      items[idx] = WorkItem{begin, len, tile * block_m, s};
    }
    base += total;
    __syncthreads();  // `scan` is rewritten by the next pass
  }
  if (tid == 0) *count = static_cast<int>(min(base, max_items));
}

}  // namespace
}  // namespace petal::cuda::attn
