// Shared internals of the attention kernels: error-check macro, workspace layout (work list),
// head-dim dispatch and the tile configuration per head dim. Internal header; include only from
// src/kernels/cuda/attention*.cu. Thread-safety: constants and pure functions only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "common/status.h"
#include "kernels/cuda/attention.h"

// Returns an Internal Status from the enclosing function if a CUDA runtime call fails. Named
// distinctly so it never clashes with the CUDA backend's own macro.
#define PETAL_ATTN_CUDA_CHECK(expr)                                        \
  do {                                                                     \
    cudaError_t petal_attn_err_ = (expr);                                  \
    if (petal_attn_err_ != cudaSuccess) {                                  \
      return ::petal::Internal(std::string("attention: ") + #expr + ": " + \
                               cudaGetErrorString(petal_attn_err_));       \
    }                                                                      \
  } while (0)

namespace petal::cuda::attn {

using bf16 = __nv_bfloat16;

// One unit of work: a tile of query rows of one sequence (for every query head; the head comes
// from blockIdx). Stored as int4 so a CTA fetches it with one 16-byte load.
struct WorkItem {
  int seq_begin;  // first token of the sequence in the packed batch
  int seq_len;    // tokens in the sequence (> 0)
  int q_row0;     // first query row of the tile, relative to seq_begin
  int seq;        // sequence index (AttentionParams::kv_lens; diagnostics)
};
static_assert(sizeof(WorkItem) == 16);

// Smallest query tile of any configuration; bounds the work list for every head_dim.
constexpr int kMinBlockM = 32;
// Workspace: [int count | pad to 256 B | WorkItem items[kMaxItems]].
constexpr size_t kItemsOffset = 256;

// An upper bound on sum over sequences of ceil(len / block_m) when sum(len) <= max_tokens: each
// sequence adds at most one partial tile.
inline int64_t MaxWorkItems(int max_tokens, int max_seqs, int block_m) {
  return (static_cast<int64_t>(max_tokens) + block_m - 1) / block_m + max_seqs;
}

// Calls f(std::integral_constant<int, D>{}) for the supported head dims; errors name the value.
template <typename F>
Status DispatchHeadDim(int head_dim, F&& f) {
  switch (head_dim) {
    case 32:
      return f(std::integral_constant<int, 32>{});
    case 64:
      return f(std::integral_constant<int, 64>{});
    case 128:
      return f(std::integral_constant<int, 128>{});
    default:
      return InvalidArgument("attention: head_dim " + std::to_string(head_dim) +
                             " is not supported (supported: 32, 64, 128)");
  }
}

// Tile shape of the flash kernel. Each warp owns 16 * kMTiles query rows of one query head for
// the whole pass. A CTA holds kHeadsPerCta query heads that share one KV head (GQA), so every K/V
// tile it loads serves all of them; kWarps / kHeadsPerCta warps per head give
// kBlockM = 16 * kMTiles * kWarps / kHeadsPerCta query rows per tile. K/V stream through shared
// memory kBlockN rows at a time, double-buffered.
template <int kHeadDim_, int kWarps_, int kBlockN_, int kMinBlocks_, int kHeadsPerCta_,
          int kMTiles_ = 1>
struct FlashConfig {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kHeadsPerCta = kHeadsPerCta_;
  static constexpr int kWarpsPerHead = kWarps / kHeadsPerCta;
  // m16 MMA tiles (of 16 query rows) per warp: 2 halves shared-memory reads per MMA (each K/V
  // fragment feeds two MMAs) at the cost of accumulator registers.
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kBlockM = 16 * kMTiles * kWarpsPerHead;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__ occupancy hint
  // Shared-memory rows are padded by 16 bytes: the 8 row addresses of one ldmatrix 8x8 matrix
  // then start 4 banks apart and cover all 32 banks, so loads are conflict-free without swizzle.
  static constexpr int kSmemStride = kHeadDim + 8;  // elements
  static constexpr int kQElems = kHeadsPerCta * kBlockM * kSmemStride;
  static constexpr int kKVElems = kBlockN * kSmemStride;
  // Q tiles + 2 stages of (K tile, V tile).
  static constexpr size_t kSmemBytes = (kQElems + 4 * kKVElems) * sizeof(bf16);
  static_assert(kHeadDim % 16 == 0 && kBlockN % 16 == 0);
  static_assert(kWarps % kHeadsPerCta == 0);
  static_assert(kBlockM >= kMinBlockM);
};

// Arguments of the flash kernel (passed by value).
struct FlashArgs {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  int64_t q_stride, k_stride, v_stride;
  bf16* out;
  const int* work_count;
  const WorkItem* work_items;
  const int32_t* kv_lens;  // AttentionParams::kv_lens (nullptr: every key)
  int num_heads;
  int group;           // num_heads / num_kv_heads
  float scale_log2;    // softmax scale * log2(e): scores go through exp2
  AttentionQkNorm qk;  // applied to the loaded q/k tiles by the kQkNorm kernels
};

// The flash kernel's arguments for these params and a planned workspace.
inline FlashArgs MakeFlashArgs(const AttentionParams& p, const void* workspace) {
  const auto* ws = static_cast<const char*>(workspace);
  FlashArgs args;
  args.q = p.q;
  args.k = p.k;
  args.v = p.v;
  args.q_stride = p.q_stride;
  args.k_stride = p.k_stride;
  args.v_stride = p.v_stride;
  args.out = p.out;
  args.work_count = reinterpret_cast<const int*>(ws);
  args.work_items = reinterpret_cast<const WorkItem*>(ws + kItemsOffset);
  args.kv_lens = p.kv_lens;
  args.num_heads = p.num_heads;
  args.group = p.num_heads / p.num_kv_heads;
  args.scale_log2 = p.scale * 1.4426950408889634f;  // log2(e): scores go through exp2
  args.qk = p.qk_norm;
  return args;
}

// CTAs of the flash grid: a capacity bound on work items x head groups (capacity only).
template <class Cfg>
int64_t FlashGridBlocks(const AttentionParams& p) {
  return MaxWorkItems(p.max_tokens, p.max_seqs, Cfg::kBlockM) * (p.num_heads / Cfg::kHeadsPerCta);
}

// Enqueues the plan kernel for query tiles of block_m rows (attention_plan.cu).
Status EnqueuePlan(const AttentionParams& p, void* workspace, int block_m, cudaStream_t stream);

}  // namespace petal::cuda::attn
