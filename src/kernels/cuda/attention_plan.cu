// Plan step of the ragged attention: a one-block device kernel turns cu_seqlens (device memory)
// into the work list the flash kernel walks, so no launch depends on host-side batch values.
// Also holds parameter validation and the workspace size query.
// Thread-safety: see attention.h.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"

namespace petal::cuda {
namespace attn {
namespace {

constexpr int kPlanThreads = 1024;

// One block. Each pass handles kPlanThreads sequences: thread s counts the query tiles of
// sequence s, a block scan gives each sequence its place in the list, then the thread writes its
// tiles. For causal attention a sequence's tiles are listed last-first, because later tiles see
// more keys and the hardware starts CTAs roughly in list order (heaviest first evens the tail).
__global__ void __launch_bounds__(kPlanThreads)
    PlanKernel(const int32_t* __restrict__ cu_seqlens, const int32_t* __restrict__ num_seqs_ptr,
               int max_seqs, int max_tokens, int block_m, bool causal, int64_t max_items,
               int* __restrict__ count, WorkItem* __restrict__ items) {
  using BlockScan = cub::BlockScan<int, kPlanThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  int num_seqs = max_seqs;
  if (num_seqs_ptr != nullptr) num_seqs = min(max(*num_seqs_ptr, 0), max_seqs);

  int64_t base = 0;  // items written by earlier passes
  for (int first = 0; first < num_seqs; first += kPlanThreads) {
    const int s = first + static_cast<int>(threadIdx.x);
    int begin = 0, len = 0, tiles = 0;
    if (s < num_seqs) {
      // Clamp malformed offsets so the flash kernel never reads outside [0, max_tokens).
      begin = min(max(cu_seqlens[s], 0), max_tokens);
      const int end = min(max(cu_seqlens[s + 1], begin), max_tokens);
      len = end - begin;
      tiles = (len + block_m - 1) / block_m;
    }
    int offset = 0, total = 0;
    BlockScan(scan_storage).ExclusiveSum(tiles, offset, total);
    for (int t = 0; t < tiles; ++t) {
      const int64_t idx = base + offset + t;
      if (idx >= max_items) break;
      const int tile = causal ? tiles - 1 - t : t;
      items[idx] = WorkItem{begin, len, tile * block_m, s};
    }
    base += total;
    __syncthreads();  // scan_storage is reused by the next pass
  }
  if (threadIdx.x == 0) *count = static_cast<int>(min(base, max_items));
}

}  // namespace

Status EnqueuePlan(const AttentionParams& p, void* workspace, int block_m, cudaStream_t stream) {
  if (workspace == nullptr) return InvalidArgument("attention: null workspace");
  auto* ws = static_cast<char*>(workspace);
  PlanKernel<<<1, kPlanThreads, 0, stream>>>(
      p.cu_seqlens, p.num_seqs, p.max_seqs, p.max_tokens, block_m, p.causal,
      MaxWorkItems(p.max_tokens, p.max_seqs, block_m), reinterpret_cast<int*>(ws),
      reinterpret_cast<WorkItem*>(ws + kItemsOffset));
  PETAL_ATTN_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace attn

size_t AttentionWorkspaceBytes(int max_tokens, int max_seqs) {
  if (max_tokens < 0 || max_seqs < 0) return 0;
  return attn::kItemsOffset +
         static_cast<size_t>(attn::MaxWorkItems(max_tokens, max_seqs, attn::kMinBlockM)) *
             sizeof(attn::WorkItem);
}

Status ValidateAttentionParams(const AttentionParams& p) {
  auto bad = [](const std::string& m) { return InvalidArgument("attention: " + m); };
  if (p.max_tokens < 0 || p.max_seqs < 0) return bad("negative capacity");
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return bad("num_heads " + std::to_string(p.num_heads) + " must be a positive multiple of " +
               "num_kv_heads " + std::to_string(p.num_kv_heads));
  }
  if (p.head_dim != 32 && p.head_dim != 64 && p.head_dim != 128) {
    return bad("head_dim " + std::to_string(p.head_dim) + " is not supported (32, 64, 128)");
  }
  if (p.max_tokens > 0 && (!p.q || !p.k || !p.v || !p.out)) return bad("null q/k/v/out");
  if (!p.cu_seqlens) return bad("null cu_seqlens");
  // cp.async moves 16-byte chunks: every row start must be 16-byte aligned.
  auto misaligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
  if (misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.out)) {
    return bad("q/k/v/out must be 16-byte aligned");
  }
  if (p.q_stride % 8 || p.k_stride % 8 || p.v_stride % 8) {
    return bad("q/k/v strides must be multiples of 8 elements");
  }
  if (p.q_stride < static_cast<int64_t>(p.num_heads) * p.head_dim ||
      p.k_stride < static_cast<int64_t>(p.num_kv_heads) * p.head_dim ||
      p.v_stride < static_cast<int64_t>(p.num_kv_heads) * p.head_dim) {
    return bad("a q/k/v stride is shorter than its heads");
  }
  if (!(p.scale > 0.0f)) return bad("scale must be positive");
  return Status::Ok();
}

}  // namespace petal::cuda
