// The per-batch metadata kernel of the cuDNN attention backend (attention_cudnn.h): sequence
// lengths and ragged element offsets derived from cu_seqlens on the device, so the launch stays
// graph-safe (nothing per batch is read on the host). Thread-safety: see attention_cudnn.h.
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

__global__ void CudnnMetaKernel(const int32_t* __restrict__ cu_seqlens,
                                const int32_t* __restrict__ num_seqs, int max_seqs,
                                int32_t qkv_stride, int32_t out_stride, CudnnAttentionMeta m) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int n = num_seqs ? min(max(*num_seqs, 0), max_seqs) : max_seqs;
  const int32_t end = cu_seqlens[n];
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i <= max_seqs; i += blockDim.x * gridDim.x) {
    // Sequences past n are empty and start where the last real one ends.
    const int32_t start = i <= n ? cu_seqlens[i] : end;
    m.qkv_offset[i] = start * qkv_stride;
    m.out_offset[i] = start * out_stride;
    if (i < max_seqs) m.seq_lens[i] = i < n ? cu_seqlens[i + 1] - start : 0;
  }
}

}  // namespace

Status LaunchCudnnAttentionMeta(const AttentionParams& p, const CudnnAttentionMeta& meta,
                                cudaStream_t stream) {
  if (p.q_stride != p.k_stride || p.q_stride != p.v_stride) {
    return InvalidArgument("cuDNN attention: q/k/v row strides differ");
  }
  if (!p.cu_seqlens || !meta.seq_lens) return InvalidArgument("cuDNN attention: null metadata");
  // int32 offsets: the last element offset must fit.
  if (static_cast<int64_t>(p.max_tokens) * p.q_stride > INT32_MAX) {
    return InvalidArgument("cuDNN attention: offsets overflow int32");
  }
  const int threads = 256, blocks = (p.max_seqs + threads) / threads;
  (void)LaunchPdl(CudnnMetaKernel, blocks, threads, 0, stream, p.cu_seqlens, p.num_seqs, p.max_seqs,
                  static_cast<int32_t>(p.q_stride), p.num_heads * p.head_dim, meta);
  PETAL_CUDA_CHECK_LAUNCH("CudnnMetaKernel");
  return Status::Ok();
}

}  // namespace petal::cuda
