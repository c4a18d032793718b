// GEMMs with the elementwise work that follows them fused into their epilogue (issue 32): a
// CUTLASS 3 Hopper main loop and our own epilogues (gemm_fused_kernel.cuh,
// gemm_fused_epilogues.cuh), which read the fp32 accumulators in registers, so the GEMM's raw
// output never reaches memory and no separate kernel runs:
//  - GemmSwiglu, the Qwen3 MLP's first half: act = silu(x Wgate^T) * (x Wup^T). At 100 x 512
//    tokens the [tokens, 2 * inter] product and its re-read are ~0.8 GB per layer of the 0.6b.
//  - GemmQkvRope, the Qwen3 attention input: qkv = x Wqkv^T + b, then LaunchQkNormRope's q/k
//    RMSNorm and rotary, for head_dim 128.
//  - GemmBiasGelu, BERT's FFN input: gelu(x Win^T + b) with the exact (erf) GELU of LaunchGelu,
//    which cuBLASLt's epilogues do not offer (theirs is the tanh form).
//
// Weight layout: the kernel needs each feature's gate and up in adjacent output columns, so the
// gate/up weight [2 * inter, k] (gate rows, then up rows, as checkpoints store it) is interleaved
// once at load by LaunchInterleaveGateUp (row 2i = gate i, row 2i + 1 = up i). A model that
// interleaves uses LaunchSiluMulInterleaved after a plain GEMM for the batches it does not fuse.
//
// Numerics: the unfused ops' functions over the unrounded fp32 GEMM result (the unfused path
// rounds the GEMM's output to bf16 first), one rounding to bf16. Built only with the CUTLASS
// headers and an sm_90a target (kernels_cuda.cmake); otherwise GemmSwigluAvailable() is false.
// Thread-safety: launchers are stateless apart from a once-per-kernel attribute set (done on the
// first call, which must not be inside graph capture: PrepareGemmSwiglu).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"
#include "kernels/cuda/ops.h"

namespace petal::cuda {

struct GemmSwigluParams {
  const bf16* x = nullptr;  // [m, k] row-major
  const bf16* w = nullptr;  // [2 * inter, k] row-major, gate/up rows interleaved
  bf16* out = nullptr;      // [m, inter] row-major
  int m = 0, inter = 0, k = 0;
  int config = 0;  // tile configuration, < GemmSwigluConfigs()
};

// Whether this binary has the kernel and the current device runs it (compute capability 9.0).
bool GemmSwigluAvailable();  // and GemmQkvRope, GemmBiasGelu
// Tile configurations compiled in (0 without CUTLASS), and their names, e.g. "swiglu/P256x1"
// (cooperative C or pingpong P, feature tile width, cluster size along tokens).
int GemmSwigluConfigs();
std::string GemmSwigluConfigName(int config);
int GemmQkvRopeConfigs();
std::string GemmQkvRopeConfigName(int config);

// Sets every fused kernel's shared-memory attribute; call once outside graph capture.
Status PrepareGemmSwiglu();

// Enqueues out = SwiGLU(x w^T). Requires k and 2 * inter multiples of 8 and 16-byte aligned
// pointers; any m >= 0. Graph-capturable after PrepareGemmSwiglu.
Status LaunchGemmSwiglu(const GemmSwigluParams& p, cudaStream_t stream);

// out = QkNormRope(x w^T + bias) with LaunchQkNormRope's conventions (ops.h): rows [q heads | k
// heads | v heads] of 128, norm weights per q / k head (both null: no norm), rotary from the
// table (RopeTable) at positions clamped to its rows (positions null: no rotary).
struct GemmQkvRopeParams {
  const bf16* x = nullptr;     // [m, k]
  const bf16* w = nullptr;     // [(num_q_heads + 2 num_kv_heads) * 128, k]
  const bf16* bias = nullptr;  // [n] or null
  bf16* out = nullptr;         // [m, n]
  int m = 0, k = 0;
  int num_q_heads = 0, num_kv_heads = 0;
  const bf16* q_norm_weight = nullptr;  // [128]
  const bf16* k_norm_weight = nullptr;  // [128]
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [m]
  const float2* rope_table = nullptr;  // [rope_table_rows, 64]
  int rope_table_rows = 0;
  int config = 0;  // < GemmQkvRopeConfigs()
};
Status LaunchGemmQkvRope(const GemmQkvRopeParams& p, cudaStream_t stream);

// out = gelu(x w^T + bias), exact GELU (ops.h LaunchGelu). Requires k and n multiples of 8,
// 16-byte aligned pointers; any m >= 0. Graph-capturable after PrepareGemmSwiglu.
struct GemmBiasGeluParams {
  const bf16* x = nullptr;     // [m, k]
  const bf16* w = nullptr;     // [n, k]
  const bf16* bias = nullptr;  // [n] or null
  bf16* out = nullptr;         // [m, n]
  int m = 0, n = 0, k = 0;
  int config = 0;  // < GemmBiasGeluConfigs()
};
int GemmBiasGeluConfigs();
std::string GemmBiasGeluConfigName(int config);
Status LaunchGemmBiasGelu(const GemmBiasGeluParams& p, cudaStream_t stream);

// out rows 2i and 2i + 1 = in rows i and inter + i, for an [2 * inter, k] bf16 matrix. out must
// not alias in.
struct InterleaveGateUpParams {
  const bf16* in = nullptr;
  bf16* out = nullptr;
  int inter = 0, k = 0;
};
Status LaunchInterleaveGateUp(const InterleaveGateUpParams& p, cudaStream_t stream);

// LaunchSiluMul for an interleaved gate/up product: out[r, i] = silu(gu[r, 2i]) * gu[r, 2i + 1].
Status LaunchSiluMulInterleaved(const SiluMulParams& p, cudaStream_t stream);

}  // namespace petal::cuda
