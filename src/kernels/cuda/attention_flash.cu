// Run step of the ragged attention: instantiates the flash kernel for each tile variant and
// (head_dim, causal), picks the variant, and launches over the work list that the plan wrote. The
// grid is sized from capacity only (MaxWorkItems x head groups), so the launch is identical for
// every batch of that capacity. Thread-safety: see attention.h.
#include <climits>
#include <cmath>
#include <tuple>
#include <utility>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/attention_internal.h"

namespace petal::cuda {
namespace attn {
namespace {

// Variants per head dim, in order of preference (the default is the first that supports the
// GQA group). FlashConfig<head_dim, warps, block_n, min CTAs per SM, q heads per CTA>.
template <int kHeadDim>
struct Variants;
template <>
struct Variants<32> {
  using List = std::tuple<FlashConfig<32, 4, 64, 4, 1>, FlashConfig<32, 8, 64, 2, 2>>;
};
template <>
struct Variants<64> {
  using List = std::tuple<FlashConfig<64, 4, 64, 3, 1>, FlashConfig<64, 8, 64, 1, 2>>;
};
template <>
struct Variants<128> {
  using List = std::tuple<FlashConfig<128, 8, 64, 1, 2>, FlashConfig<128, 4, 64, 2, 1>,
                          FlashConfig<128, 8, 64, 1, 1>>;
};

// Calls f(Config{}) for variant `index` of head dim D (compile-time walk of the list).
template <int D, size_t I = 0, class F>
Status WithVariant(int index, F&& f) {
  using List = typename Variants<D>::List;
  if constexpr (I == std::tuple_size_v<List>) {
    return InvalidArgument("attention: no flash variant " + std::to_string(index) +
                           " for head_dim " + std::to_string(D));
  } else {
    if (index == static_cast<int>(I)) return f(std::tuple_element_t<I, List>{});
    return WithVariant<D, I + 1>(index, std::forward<F>(f));
  }
}

template <class Cfg, bool kCausal>
Status LaunchFlash(const AttentionParams& p, const void* workspace, cudaStream_t stream) {
  const auto kernel = FlashAttentionKernel<Cfg, kCausal>;
  // Not a stream operation, so it is allowed (and cheap) during graph capture; set every call so
  // it also holds on whichever device is current.
  PETAL_ATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(Cfg::kSmemBytes)));
  const int64_t blocks =
      MaxWorkItems(p.max_tokens, p.max_seqs, Cfg::kBlockM) * (p.num_heads / Cfg::kHeadsPerCta);
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

Status CheckVariant(const AttentionParams& p, int variant) {
  PETAL_RETURN_IF_ERROR(ValidateAttentionParams(p));
  if (variant < 0 || variant >= FlashVariantCount(p.head_dim)) {
    return InvalidArgument("attention: no flash variant " + std::to_string(variant) +
                           " for head_dim " + std::to_string(p.head_dim));
  }
  if (!FlashVariantSupports(p.head_dim, variant, p.num_heads / p.num_kv_heads)) {
    return InvalidArgument("attention: flash variant " + FlashVariantName(p.head_dim, variant) +
                           " needs the GQA group to be a multiple of its heads per CTA");
  }
  return Status::Ok();
}

}  // namespace
}  // namespace attn

int FlashVariantCount(int head_dim) {
  int n = 0;
  (void)attn::DispatchHeadDim(head_dim, [&](auto d) -> Status {
    n = static_cast<int>(std::tuple_size_v<typename attn::Variants<decltype(d)::value>::List>);
    return Status::Ok();
  });
  return n;
}

std::string FlashVariantName(int head_dim, int variant) {
  std::string name = "invalid";
  (void)attn::DispatchHeadDim(head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      using Cfg = decltype(cfg);
      name = "w" + std::to_string(Cfg::kWarps) + " bm" + std::to_string(Cfg::kBlockM) + " bn" +
             std::to_string(Cfg::kBlockN) + " hpc" + std::to_string(Cfg::kHeadsPerCta);
      return Status::Ok();
    });
  });
  return name;
}

bool FlashVariantSupports(int head_dim, int variant, int group) {
  bool ok = false;
  (void)attn::DispatchHeadDim(head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      ok = group > 0 && group % decltype(cfg)::kHeadsPerCta == 0;
      return Status::Ok();
    });
  });
  return ok;
}

int DefaultFlashVariant(const AttentionParams& p) {
  if (p.num_kv_heads <= 0) return 0;
  const int group = p.num_heads / p.num_kv_heads;
  for (int v = 0; v < FlashVariantCount(p.head_dim); ++v) {
    if (FlashVariantSupports(p.head_dim, v, group)) return v;
  }
  return 0;
}

Status PlanRaggedAttentionVariant(const AttentionParams& p, int variant, void* workspace,
                                  cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(attn::CheckVariant(p, variant));
  return attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      return attn::EnqueuePlan(p, workspace, decltype(cfg)::kBlockM, stream);
    });
  });
}

Status RunRaggedAttentionVariant(const AttentionParams& p, int variant, const void* workspace,
                                 cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(attn::CheckVariant(p, variant));
  if (workspace == nullptr) return InvalidArgument("attention: null workspace");
  return attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      using Cfg = decltype(cfg);
      return p.causal ? attn::LaunchFlash<Cfg, true>(p, workspace, stream)
                      : attn::LaunchFlash<Cfg, false>(p, workspace, stream);
    });
  });
}

Status LaunchRaggedAttentionVariant(const AttentionParams& p, int variant, void* workspace,
                                    cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(PlanRaggedAttentionVariant(p, variant, workspace, stream));
  return RunRaggedAttentionVariant(p, variant, workspace, stream);
}

Status PlanRaggedAttention(const AttentionParams& p, void* workspace, cudaStream_t stream) {
  return PlanRaggedAttentionVariant(p, DefaultFlashVariant(p), workspace, stream);
}

Status RunRaggedAttention(const AttentionParams& p, const void* workspace, cudaStream_t stream) {
  return RunRaggedAttentionVariant(p, DefaultFlashVariant(p), workspace, stream);
}

Status LaunchRaggedAttention(const AttentionParams& p, void* workspace, cudaStream_t stream) {
  return LaunchRaggedAttentionVariant(p, DefaultFlashVariant(p), workspace, stream);
}

}  // namespace petal::cuda
