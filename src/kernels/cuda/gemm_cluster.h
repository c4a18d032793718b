// Internal to Gemm: our bf16 GEMM for few to a few hundred tokens (M <= 512), one more family of
// candidates for the tuner (used only where it measures faster than cuBLASLt and its output agrees
// with cuBLASLt's; see gemm_tune.cc). Small-M products are bound by streaming the weights, so the
// kernel splits K over the CTAs of a thread-block cluster (up to 8) to put enough loads in flight
// (a 4-stage cp.async pipeline of 64-deep tiles per CTA), multiplies on tensor cores (mma.sync
// m16n8k16 from XOR-swizzled shared memory via ldmatrix, fp32 accumulation), then reduces the
// K-split partials through distributed shared memory inside the cluster, in a fixed order
// (deterministic, no workspace, no second kernel) and applies Gemm's epilogue there.
// Computes Gemm's function: out = epilogue(a w^T + c + bias). Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"
#include "kernels/cuda/gemm_params.h"

namespace petal::cuda {

constexpr int kClusterGemmMaxM = 512;

// Tile configurations (output features x tokens per CTA); see ClusterGemmName.
int ClusterGemmConfigs();
std::string ClusterGemmName(int config);
// The configurations worth timing for `m` tokens (the smallest token tile covering m, capped at
// 128, in both feature widths).
void ClusterGemmConfigsFor(int m, int out[2]);

// Whether `config` with `splits` K-splits (1, 2, 4 or 8) handles p: 1 <= m <= 512, n a multiple
// of the tile width, k a multiple of 64 * splits, a and w 16-byte aligned, out and c 8-byte
// aligned.
bool ClusterGemmSupported(const GemmParams& p, int config, int splits);

// Enqueues out = epilogue(a w^T + c + bias) on `stream`; requires ClusterGemmSupported.
Status LaunchClusterGemm(const GemmParams& p, int config, int splits, cudaStream_t stream);

}  // namespace petal::cuda
