// Ragged (variable-length) multi-head attention on the GPU: the public API of Petal's own
// FlashAttention-2-style kernel (bf16 tensor cores, fp32 online softmax) and of a plain reference
// kernel used by tests and as a fallback.
//
// Graph safety: every launch configuration (grid, block, shared memory) depends only on the
// capacity fields of AttentionParams (max_tokens, max_seqs, head counts, head_dim, causal), never
// on the current batch. Per-batch values (cu_seqlens, num_seqs) are read from device memory by a
// small plan kernel that writes a work list into the caller's workspace. So one captured CUDA graph
// serves every batch within its capacity, provided the same device buffers are reused.
//
// Thread-safety: the functions only enqueue work on the given stream; concurrent calls on
// different streams need distinct workspaces and outputs. The first call per head_dim configures
// kernel attributes (thread-safe, done once).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace petal::cuda {

// Qwen3's per-head q/k RMSNorm + rotary (LaunchQkNormRope's math, ops.h), applied by the attention
// kernel to the q and k tiles it loads instead of in place beforehand: q and k stay in global
// memory as the QKV GEMM wrote them, and the separate kernel's launch and its pass over the q/k
// rows disappear (issue 32). Only Petal's flash kernel at head_dim 128 does it
// (FlashFoldsQkNorm); other backends get LaunchQkNormRope first (AttentionRunner).
struct AttentionQkNorm {
  const __nv_bfloat16* q_weight = nullptr;  // [head_dim]; null: not in use
  const __nv_bfloat16* k_weight = nullptr;  // [head_dim]
  float eps = 1e-6f;
  // DEVICE, [max_tokens]: each token's rotary position, which must be its index within its
  // sequence (cpu::Rope's convention; the flash prologue computes it so, LaunchQkNormRope reads
  // it).
  const int32_t* positions = nullptr;
  const float2* rope_table = nullptr;  // DEVICE, RopeTable (ops.h): (cos, sin) per position, pair
  int rope_table_rows = 0;             // positions are clamped to rows - 1
  bool enabled() const { return q_weight != nullptr; }
};

// Describes one ragged attention call. Layout: row t of q starts at q + t * q_stride elements and
// head h of that row at + h * head_dim (same for k, v with num_kv_heads heads). In Petal's fused
// QKV buffer q_stride = k_stride = v_stride = (num_heads + 2 * num_kv_heads) * head_dim.
struct AttentionParams {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  int64_t q_stride = 0;  // elements between token rows; multiple of 8 (16-byte loads)
  int64_t k_stride = 0;
  int64_t v_stride = 0;
  // [max_tokens, num_heads, head_dim] contiguous. Rows of tokens that belong to no sequence (at or
  // past cu_seqlens[num_seqs]) are left untouched.
  __nv_bfloat16* out = nullptr;
  // DEVICE memory, max_seqs + 1 non-decreasing offsets starting at 0; entries past num_seqs are
  // ignored. Sequence s is tokens [cu_seqlens[s], cu_seqlens[s+1]); lengths 0 are allowed.
  const int32_t* cu_seqlens = nullptr;
  // DEVICE memory, one int32: sequences in this batch (clamped to [0, max_seqs]). nullptr: all
  // max_seqs sequences are used (pad with empty sequences by repeating the last offset).
  const int32_t* num_seqs = nullptr;
  // Capacity: the launch configuration depends only on these and the shape fields below.
  int max_tokens = 0;  // cu_seqlens[num_seqs] <= max_tokens
  int max_seqs = 0;
  int num_heads = 0;     // query heads
  int num_kv_heads = 0;  // num_heads % num_kv_heads == 0 (grouped-query attention)
  int head_dim = 0;      // 32, 64 or 128
  bool causal = false;   // key j attends to query i only if j <= i (positions within the sequence)
  float scale = 0.0f;    // softmax scale, usually 1 / sqrt(head_dim)
  // Host-side upper bound on every sequence's length (0: max_tokens). Petal's kernels ignore it;
  // backends whose launch is sized by the longest sequence (cuDNN) use it, so it is a capacity
  // field too: a graph captured with one value serves only batches within it.
  int max_seqlen = 0;
  // DEVICE memory or nullptr (all keys): max_seqs entries, sequence s attends only to its first
  // kv_lens[s] tokens (0: all of them) while every token is still a query; not with causal.
  // A multi-vector model's query expansion tokens (cpu::Attention's kv_lens). Petal's flash and
  // reference kernels take it; cuDNN does not (AttentionRunner then runs flash).
  const int32_t* kv_lens = nullptr;
  // Optional q/k norm + rotary on load (see AttentionQkNorm); needs FlashFoldsQkNorm(*this).
  AttentionQkNorm qk_norm;
};

// Whether RunRaggedAttention applies p.qk_norm itself: head_dim 128, both weights, positions and
// a rope table, and no kv_lens.
bool FlashFoldsQkNorm(const AttentionParams& p);

// Bytes of device workspace the plan needs for this capacity (any head_dim, causal or not).
size_t AttentionWorkspaceBytes(int max_tokens, int max_seqs);

// Checks shapes, pointers and alignment on the host; no device access.
Status ValidateAttentionParams(const AttentionParams& p);
// The same checks except the flash kernel's head dims: any multiple of 8 up to 128 (the reference
// kernel's contract).
Status ValidateAttentionLayout(const AttentionParams& p);

// Enqueues the plan kernel: reads cu_seqlens/num_seqs and writes the work list into `workspace`
// (AttentionWorkspaceBytes bytes of device memory, 16-byte aligned; cudaMalloc's are). Valid for
// every Run on the same device with the same cu_seqlens contents and the same capacity, head
// counts, head_dim and causal flag (e.g. all layers of one forward pass); the tiling it encodes
// is chosen from exactly those.
Status PlanRaggedAttention(const AttentionParams& p, void* workspace, cudaStream_t stream);

// Enqueues the attention kernel over the work list that PlanRaggedAttention wrote.
Status RunRaggedAttention(const AttentionParams& p, const void* workspace, cudaStream_t stream);

// PlanRaggedAttention followed by RunRaggedAttention on the same stream.
Status LaunchRaggedAttention(const AttentionParams& p, void* workspace, cudaStream_t stream);

// Plain reference: one thread block per (token, query head), fp32 math, two passes over the keys.
// Slow but obviously correct; same contract as LaunchRaggedAttention, no workspace. Graph-safe.
Status LaunchReferenceAttention(const AttentionParams& p, cudaStream_t stream);

}  // namespace petal::cuda
