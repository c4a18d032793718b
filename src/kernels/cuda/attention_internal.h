// Tile-configuration variants of the flash attention kernel, exposed for the GPU tests (every
// variant must be correct) and the micro-benchmark (to pick the default per head_dim). Serving
// code uses attention.h, which always runs DefaultFlashVariant. Thread-safety: as attention.h.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"
#include "kernels/cuda/attention.h"

namespace petal::cuda {

// Number of compiled variants for head_dim (0 if unsupported).
int FlashVariantCount(int head_dim);
// Short description, e.g. "w8 bm64 bn64 hpc2" (warps, query rows, key rows, heads per CTA).
std::string FlashVariantName(int head_dim, int variant);
// Whether the variant can run with this GQA group size (num_heads / num_kv_heads).
bool FlashVariantSupports(int head_dim, int variant, int group);
// The variant Plan/Run/Launch use for these params: the first one, in preference order, that
// supports the group size.
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
