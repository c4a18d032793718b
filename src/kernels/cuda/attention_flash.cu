// Run step of the ragged attention: instantiates the flash kernel per (head_dim, causal) and
// launches it over the work list written by PlanRaggedAttention. The grid is sized from capacity
// only (MaxWorkItems x num_heads), so the launch is identical for every batch of that capacity.
// Thread-safety: see attention.h.
#include <climits>
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_flash.cuh"

namespace petal::cuda {
namespace attn {
namespace {

template <int kHeadDim, bool kCausal>
Status LaunchFlash(const AttentionParams& p, const void* workspace, cudaStream_t stream) {
  using Cfg = FlashConfigFor<kHeadDim>;
  const auto kernel = FlashAttentionKernel<Cfg, kCausal>;
  // Not a stream operation, so it is allowed (and cheap) during graph capture; set every call so
  // it also holds on whichever device is current.
  PETAL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Cfg::kSmemBytes)));
  const int64_t blocks = MaxWorkItems(p.max_tokens, p.max_seqs, Cfg::kBlockM) * p.num_heads;
  if (blocks > INT_MAX) {
    return InvalidArgument("attention: capacity too large for one grid (" + std::to_string(blocks) +
                           " CTAs)");
  }
  if (blocks == 0) return Status::Ok();
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
  args.num_heads = p.num_heads;
  args.group = p.num_heads / p.num_kv_heads;
  args.scale_log2 = p.scale * static_cast<float>(M_LOG2E);
  kernel<<<static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(args);
  PETAL_ATTN_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace
}  // namespace attn

Status RunRaggedAttention(const AttentionParams& p, const void* workspace, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(ValidateAttentionParams(p));
  if (workspace == nullptr) return InvalidArgument("attention: null workspace");
  return attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    constexpr int kD = decltype(d)::value;
    return p.causal ? attn::LaunchFlash<kD, true>(p, workspace, stream)
                    : attn::LaunchFlash<kD, false>(p, workspace, stream);
  });
}

}  // namespace petal::cuda
