// The second ragged attention backend: cuDNN's fused flash attention (SDPA through the cuDNN
// frontend graph API), on the same AttentionParams as Petal's own kernel. cuDNN's Hopper kernels
// use wgmma/TMA, so on long sequences they can outrun our mma.sync kernel; AttentionRunner times
// both at first use per batch shape and keeps the faster (engine/cuda/attention_runner.h).
//
// cuDNN sees the batch as [num_seqs, heads, max_seqlen, head_dim] with per-sequence lengths
// (padding mask) and ragged offsets into our packed token rows, so no data is copied or padded.
// A cuDNN plan is built per (sequences, max_seqlen, heads, head_dim, causal, strides); building
// takes milliseconds to seconds and must happen outside stream capture (Prepare). Run() only
// enqueues kernels, so it can be captured in a CUDA graph once Prepare() succeeded for its shape.
//
// Built only when the cuDNN frontend headers were found at configure time (PETAL_HAVE_CUDNN);
// otherwise Create() returns Unavailable. At run time cuDNN >= 9.0 with sm_90+ is required.
//
// Thread-safety: one instance per engine thread; not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "kernels/cuda/attention.h"

namespace petal::cuda {

// Device-side per-batch metadata cuDNN reads: lengths and element offsets of each sequence.
// Filled by LaunchCudnnAttentionMeta from cu_seqlens (once per forward pass).
struct CudnnAttentionMeta {
  int32_t* seq_lens = nullptr;    // [max_seqs]
  int32_t* qkv_offset = nullptr;  // [max_seqs + 1] cu_seqlens * q_stride (q, k and v share it)
  int32_t* out_offset = nullptr;  // [max_seqs + 1] cu_seqlens * num_heads * head_dim
};

// Bytes of device memory a CudnnAttentionMeta needs for max_seqs sequences (three int32 arrays,
// each 16-byte aligned).
size_t CudnnAttentionMetaBytes(int max_seqs);
// Carves a CudnnAttentionMeta out of `storage` (CudnnAttentionMetaBytes(max_seqs) bytes).
CudnnAttentionMeta CarveCudnnAttentionMeta(void* storage, int max_seqs);
// Enqueues the kernel that fills `meta` for p.max_seqs sequences from p.cu_seqlens (sequences
// past *p.num_seqs get length 0). Requires p.q_stride == p.k_stride == p.v_stride.
Status LaunchCudnnAttentionMeta(const AttentionParams& p, const CudnnAttentionMeta& meta,
                                cudaStream_t stream);

class CudnnAttention {
 public:
  // Creates the cuDNN handle bound to `stream`. Unavailable when cuDNN support was not built in,
  // the library cannot be loaded, or the device is older than sm_90.
  static StatusOr<std::unique_ptr<CudnnAttention>> Create(cudaStream_t stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Builds (once) the plan for p's shape with sequences of at most `max_seqlen` tokens.
  // Unimplemented / Internal when cuDNN does not support the shape; never inside stream capture.
  Status Prepare(const AttentionParams& p, int max_seqlen);
  // Enqueues attention for p (Prepare must have succeeded for the same shape and max_seqlen).
  // `meta` was filled for this batch; `workspace` holds WorkspaceBytes() bytes.
  Status Run(const AttentionParams& p, int max_seqlen, const CudnnAttentionMeta& meta,
             void* workspace, cudaStream_t stream);
  // Largest workspace any prepared plan needs.
  size_t WorkspaceBytes() const { return max_workspace_; }
  // e.g. "cudnn 9.14.0" (the library loaded at run time).
  std::string Version() const;

 private:
  struct Impl;
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  size_t max_workspace_ = 0;
};

}  // namespace petal::cuda
