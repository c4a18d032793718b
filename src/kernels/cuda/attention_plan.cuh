// The plan kernel of the ragged attention: one CTA turns cu_seqlens (device memory) into the work
// list the flash kernel walks, so no launch depends on host-side batch values. Internal header,
// included by attention_plan.cu (and by the CPU emulation test). Thread-safety: a kernel.
#pragma once

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda::attn {

constexpr int kPlanThreads = 1024;

namespace {  // internal linkage: the emulation test compiles its own host copy

// One block of kPlanThreads. Each pass handles kPlanThreads sequences: thread i takes sequence
// first + i and counts its query tiles; the sequences of the pass are ranked longest first
// (ties by index), an inclusive block scan (Hillis-Steele in shared memory) over the ranked
// counts gives each sequence its place in the list, and the thread writes its tiles there.
// Longest first, and for causal attention a sequence's tiles last-first (later tiles see more
// keys), because the hardware starts CTAs roughly in list order: heaviest work first evens the
// tail of a ragged batch.
__global__ void __launch_bounds__(kPlanThreads)
    PlanKernel(const int32_t* __restrict__ cu_seqlens, const int32_t* __restrict__ num_seqs_ptr,
               int max_seqs, int max_tokens, int block_m, bool causal, int64_t max_items,
               int* __restrict__ count, WorkItem* __restrict__ items) {
  PdlWait();                                 // see pdl.cuh: before any global memory access
  static __shared__ int key[kPlanThreads];   // length of the pass's sequence i, -1 if none
  static __shared__ int scan[kPlanThreads];  // tile counts in ranked order, then their prefix sums
  const int tid = static_cast<int>(threadIdx.x);
  int num_seqs = max_seqs;
  if (num_seqs_ptr != nullptr) num_seqs = min(max(*num_seqs_ptr, 0), max_seqs);

  int64_t base = 0;  // items written by earlier passes
  for (int first = 0; first < num_seqs; first += kPlanThreads) {
    const int s = first + tid;
    const int in_pass = min(kPlanThreads, num_seqs - first);
    int begin = 0, len = 0, tiles = 0;
    if (s < num_seqs) {
      // Clamp malformed offsets so the flash kernel never reads outside [0, max_tokens).
      begin = min(max(cu_seqlens[s], 0), max_tokens);
      const int end = min(max(cu_seqlens[s + 1], begin), max_tokens);
      len = end - begin;
      tiles = (len + block_m - 1) / block_m;
    }
    const int my_key = s < num_seqs ? len : -1;
    key[tid] = my_key;
    __syncthreads();
    // Rank among the pass: longer sequences first, ties by index. Slots past the pass (key -1)
    // rank after all of them, in index order, so ranks are a permutation of 0..kPlanThreads-1.
    int rank = 0;
    for (int i = 0; i < in_pass; ++i) {
      const int k = key[i];
      rank += (k > my_key) || (k == my_key && i < tid);
    }
    if (s >= num_seqs) rank = tid;  // in_pass <= tid here: after every real sequence
    scan[rank] = tiles;
    __syncthreads();
    for (int off = 1; off < kPlanThreads; off *= 2) {
      const int add = tid >= off ? scan[tid - off] : 0;
      __syncthreads();  // all reads of this step before any write
      scan[tid] += add;
      __syncthreads();
    }
    const int offset = scan[rank] - tiles;  // exclusive prefix in ranked order
    const int total = scan[kPlanThreads - 1];
    for (int t = 0; t < tiles; ++t) {
      const int64_t idx = base + offset + t;
      if (idx >= max_items) break;
      const int tile = causal ? tiles - 1 - t : t;
      items[idx] = WorkItem{begin, len, tile * block_m, s};
    }
    base += total;
    __syncthreads();  // `key` and `scan` are rewritten by the next pass
  }
  if (tid == 0) *count = static_cast<int>(min(base, max_items));
}

}  // namespace
}  // namespace petal::cuda::attn
