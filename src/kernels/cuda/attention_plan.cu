// Plan step of the ragged attention (host side: the kernel is in attention_plan.cuh), parameter
// validation and the workspace size query.
// Thread-safety: see attention.h.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_plan.cuh"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace attn {

Status EnqueuePlan(const AttentionParams& p, void* workspace, int block_m, cudaStream_t stream) {
  if (workspace == nullptr) return InvalidArgument("attention: null workspace");
  auto* ws = static_cast<char*>(workspace);
  (void)LaunchPdl(PlanKernel, 1, kPlanThreads, 0, stream, p.cu_seqlens, p.num_seqs, p.max_seqs,
                  p.max_tokens, block_m, p.causal, MaxWorkItems(p.max_tokens, p.max_seqs, block_m),
                  reinterpret_cast<int*>(ws), reinterpret_cast<WorkItem*>(ws + kItemsOffset));
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
  if (p.head_dim != 32 && p.head_dim != 64 && p.head_dim != 128) {
    return InvalidArgument("attention: head_dim " + std::to_string(p.head_dim) +
                           " is not supported by the flash kernel (32, 64, 128)");
  }
  return ValidateAttentionLayout(p);
}

Status ValidateAttentionLayout(const AttentionParams& p) {
  auto bad = [](const std::string& m) { return InvalidArgument("attention: " + m); };
  if (p.max_tokens < 0 || p.max_seqs < 0) return bad("negative capacity");
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return bad("num_heads " + std::to_string(p.num_heads) + " must be a positive multiple of " +
               "num_kv_heads " + std::to_string(p.num_kv_heads));
  }
  if (p.head_dim <= 0 || p.head_dim > 128 || p.head_dim % 8 != 0) {
    return bad("head_dim " + std::to_string(p.head_dim) + " must be a multiple of 8 up to 128");
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
