// Internal to Gemm: a bf16 GEMM for few to a few hundred tokens (M <= 512) on Hopper's own
// instructions, one more family of candidates for the tuner (used only where it measures faster
// than cuBLASLt and its output agrees with cuBLASLt's; see gemm_tune.cc). At small M a GEMM is
// bound by how many CTAs stream its weights and by each CTA's share of the activation slab, so
// the output features are cut into 64- or 128-wide tiles and K into `splits` slices over the CTAs
// of one thread-block cluster. Per CTA, one producer warp streams weight and activation boxes with
// TMA (128-byte swizzle, one mbarrier pair per stage; the weights, which no earlier kernel writes,
// are requested before the programmatic-launch wait) and one or two consumer warpgroups multiply
// them with wgmma (tokens as wgmma's N side, fp32 accumulators). The K-split partials are summed
// through distributed shared memory in rank order (deterministic, no workspace, no second kernel)
// and Gemm's epilogue is applied there. Computes Gemm's function: out = epilogue(a w^T + c +
// bias). Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"
#include "kernels/cuda/gemm_params.h"

namespace petal::cuda {

constexpr int kWgmmaGemmMaxM = 512;

// Tile configurations (output features x tokens per CTA); see WgmmaGemmName.
int WgmmaGemmConfigs();
std::string WgmmaGemmName(int config);
// The configurations worth timing for `m` tokens: the smallest token tile covering m (capped at
// 128; larger m takes several token tiles), in both feature widths.
void WgmmaGemmConfigsFor(int m, int out[2]);

// True when PETAL_GEMM_WGMMA=1 is in the environment (read at each tuning): only then does the
// tuner time the kernel. Off by default: measured slower than cuBLASLt (docs/kernels.md).
bool WgmmaGemmEnabled();

// Whether the binary has the kernel (built for sm_90a) and the current device runs it (sm_90),
// and `config` with `splits` K-splits (1, 2, 4 or 8) handles p: bf16, 1 <= m <= 512, n a
// multiple of the tile width, k a multiple of 64 * splits, a and w 16-byte aligned, out 8-byte
// aligned.
bool WgmmaGemmSupported(const GemmParams& p, int config, int splits);

// Enqueues out = epilogue(a w^T + c + bias) on `stream`; requires WgmmaGemmSupported. Encodes
// two TMA descriptors on the host per call (a few microseconds; captured graphs keep them).
Status LaunchWgmmaGemm(const GemmParams& p, int config, int splits, cudaStream_t stream);

}  // namespace petal::cuda
