// Tile-configuration variants of the flash attention kernel, exposed for the GPU tests (every
// variant must be correct) and the micro-benchmark (to pick the default per head_dim). Serving
// code uses attention.h, which always runs DefaultFlashVariant. Thread-safety: as attention.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/status.h"
#include "kernels/cuda/attention.h"

namespace petal::cuda {

// Number of compiled variants for head_dim (0 if unsupported).
int FlashVariantCount(int head_dim);
// Short description, e.g. "w8 bm64 bn64 hpc2 mt1" (warps, query rows and key rows per tile,
// query heads per CTA, m16 tiles per warp).
std::string FlashVariantName(int head_dim, int variant);
// Whether the variant can run with this GQA group size (num_heads / num_kv_heads).
bool FlashVariantSupports(int head_dim, int variant, int group);
// CTAs of the variant's grid for this capacity.
int64_t FlashVariantCtas(const AttentionParams& p, int variant);
// The variant Plan/Run/Launch use for these params: the first one, in preference order, that
// supports the group size and has at least two CTAs per SM of the current device; if none does,
// the supported one with the most CTAs. Depends only on capacity fields and the device.
int DefaultFlashVariant(const AttentionParams& p);
// Plan + run with an explicit variant; InvalidArgument if it does not support the params.
Status LaunchRaggedAttentionVariant(const AttentionParams& p, int variant, void* workspace,
                                    cudaStream_t stream);
// Run only (after a plan made for the same variant: plans depend on the variant's kBlockM).
Status RunRaggedAttentionVariant(const AttentionParams& p, int variant, const void* workspace,
                                 cudaStream_t stream);
Status PlanRaggedAttentionVariant(const AttentionParams& p, int variant, void* workspace,
                                  cudaStream_t stream);

}  // namespace petal::cuda
