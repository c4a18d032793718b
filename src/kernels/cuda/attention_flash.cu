// Run step of the ragged attention: variant bookkeeping and selection, and the public entry
// points. The kernels are instantiated and launched per head dim in attention_flash_d{32,64,128}.cu
// (separate translation units so they compile in parallel). Thread-safety: see attention.h.
#include <tuple>
#include <utility>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/attention_variants.h"

namespace petal::cuda {
namespace attn {
namespace {

Status CheckVariant(const AttentionParams& p, int variant, const void* workspace) {
  PETAL_RETURN_IF_ERROR(ValidateAttentionParams(p));
  if (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    return InvalidArgument("attention: workspace must be non-null and 16-byte aligned");
  }
  if (p.qk_norm.enabled() && !FlashFoldsQkNorm(p)) {
    return InvalidArgument(
        "attention: q/k norm on load needs head_dim 128, both weights, positions, a rope table "
        "and no kv_lens (run LaunchQkNormRope first otherwise)");
  }
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

bool FlashFoldsQkNorm(const AttentionParams& p) {
  const AttentionQkNorm& n = p.qk_norm;
  return p.head_dim == 128 && n.q_weight && n.k_weight && n.positions && n.rope_table &&
         n.rope_table_rows > 0 && p.kv_lens == nullptr &&
         reinterpret_cast<uintptr_t>(n.q_weight) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(n.k_weight) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(n.rope_table) % 16 == 0;
}

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
             std::to_string(Cfg::kBlockN) + " hpc" + std::to_string(Cfg::kHeadsPerCta) + " mt" +
             std::to_string(Cfg::kMTiles);
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

int64_t FlashVariantCtas(const AttentionParams& p, int variant) {
  int64_t ctas = 0;
  (void)attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      ctas = attn::FlashGridBlocks<decltype(cfg)>(p);
      return Status::Ok();
    });
  });
  return ctas;
}

int DefaultFlashVariant(const AttentionParams& p) {
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) return 0;
  const int group = p.num_heads / p.num_kv_heads;
  // Depends on capacity and the device only, so Plan and Run agree and graphs stay valid.
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 132;
  }
  int best = 0;
  int64_t best_ctas = -1;
  for (int v = 0; v < FlashVariantCount(p.head_dim); ++v) {
    if (!FlashVariantSupports(p.head_dim, v, group)) continue;
    const int64_t ctas = FlashVariantCtas(p, v);
    if (ctas >= 2 * static_cast<int64_t>(sms)) return v;
    if (ctas > best_ctas) {
      best = v;
      best_ctas = ctas;
    }
  }
  return best;
}

Status PlanRaggedAttentionVariant(const AttentionParams& p, int variant, void* workspace,
                                  cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(attn::CheckVariant(p, variant, workspace));
  return attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    return attn::WithVariant<decltype(d)::value>(variant, [&](auto cfg) -> Status {
      return attn::EnqueuePlan(p, workspace, decltype(cfg)::kBlockM, stream);
    });
  });
}

Status RunRaggedAttentionVariant(const AttentionParams& p, int variant, const void* workspace,
                                 cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(attn::CheckVariant(p, variant, workspace));
  return attn::DispatchHeadDim(p.head_dim, [&](auto d) -> Status {
    return attn::RunFlashHeadDim<decltype(d)::value>(p, variant, workspace, stream);
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
