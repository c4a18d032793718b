// Host-side launch of the flash attention kernel for one head dim: the definition of
// RunFlashHeadDim<D>, included only by attention_flash_d<D>.cu, which instantiate it (one
// translation unit per head dim keeps compile times parallel). Thread-safety: see attention.h.
#pragma once

#include <climits>
#include <string>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda::attn {

template <class Cfg, bool kCausal>
Status LaunchFlash(const AttentionParams& p, const void* workspace, cudaStream_t stream) {
  auto kernel = FlashAttentionKernel<Cfg, kCausal, false>;
  if constexpr (Cfg::kHeadDim == 128) {  // the only head dim with the q/k norm prologue
    if (p.qk_norm.enabled()) kernel = FlashAttentionKernel<Cfg, kCausal, true>;
  }
  // Not a stream operation, so it is allowed (and cheap) during graph capture; set every call so
  // it also holds on whichever device is current.
  PETAL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Cfg::kSmemBytes)));
  const int64_t blocks = FlashGridBlocks<Cfg>(p);
  if (blocks > INT_MAX) {
    return InvalidArgument("attention: capacity too large for one grid (" + std::to_string(blocks) +
                           " CTAs)");
  }
  if (blocks == 0) return Status::Ok();
  const FlashArgs args = MakeFlashArgs(p, workspace);
  (void)LaunchPdl(kernel, static_cast<unsigned>(blocks), Cfg::kThreads, Cfg::kSmemBytes, stream,
                  args);
  PETAL_ATTN_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <int D>
Status RunFlashHeadDim(const AttentionParams& p, int variant, const void* workspace,
                       cudaStream_t stream) {
  return WithVariant<D>(variant, [&](auto cfg) -> Status {
    using Cfg = decltype(cfg);
    return p.causal ? LaunchFlash<Cfg, true>(p, workspace, stream)
                    : LaunchFlash<Cfg, false>(p, workspace, stream);
  });
}

}  // namespace petal::cuda::attn
