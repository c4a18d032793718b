// FP8 (e4m3) quantisation ops of the CUDA engine's `--quantize fp8` path (docs/kernels.md, "FP8").
// Every op writes rows of e4m3 values plus one fp32 dequantisation scale per row, computed
// dynamically inside the kernel that produces the row, so no extra pass over memory:
//   scale[r] = max(amax_r, kFp8MinAmax) / 448,   q[r, i] = e4m3_rn_satfinite(v[r, i] * 448 /
//   amax_r)
// where v is the op's fp32 result (before any bf16 rounding) and amax_r = max_i |v[r, i]|. The
// GEMM (gemm.h, fp8 operands) multiplies by scale[r] of each side. QuantizeRowsFp8Host is the CPU
// reference of the formula (bit-exact for the same fp32 inputs).
// Static scales (`--fp8-scales`, petal calibrate; model/fp8_scales.h): with `static_scale`
// non-null, the op reads one per-tensor dequantisation scale s = *static_scale (calibrated
// amax / 448) from device memory instead of reducing each row:
//   scale[r] = s,   q[r, i] = e4m3_rn_satfinite(v[r, i] * rcp_rn(s))
// (values beyond the calibrated range saturate at +-448). The pointer is read when the kernel
// runs, so a captured graph picks up new values. QuantizeRowsFp8StaticHost is its CPU reference.
// Launch rules as in ops.h: one block per row, sizes from plan time, nothing allocated,
// graph-capturable. dims must be multiples of 16 with 16-byte aligned pointers,
// dim <= kMaxNormDim. Thread-safety: stateless.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace petal::cuda {

using fp8 = __nv_fp8_e4m3;
using bf16 = __nv_bfloat16;

inline constexpr float kFp8Max = 448.f;       // largest finite e4m3
inline constexpr float kFp8MinAmax = 1e-12f;  // all-zero rows get scale 1e-12/448, q = 0

// q[r, :] and scale[r] from fp32 or bf16 rows (exactly one input non-null). Weights at load time
// (per output channel) and the attention output before the O projection (per token).
struct QuantizeRowsFp8Params {
  const float* in_f32 = nullptr;  // [rows, dim]
  const bf16* in_bf16 = nullptr;  // [rows, dim]
  fp8* out = nullptr;             // [rows, dim]
  float* scale = nullptr;         // [rows]
  int rows = 0;
  int dim = 0;
  const float* static_scale = nullptr;  // [1] on the device, or null: dynamic per-row scales
};
Status LaunchQuantizeRowsFp8(const QuantizeRowsFp8Params& p, cudaStream_t stream);

// LaunchAddRmsNorm (ops.h) with a quantised output: if x != null, residual = bf16(residual + x)
// (written back); v = RmsNorm(residual) * weight in fp32; then q, scale from v.
struct AddRmsNormFp8Params {
  const bf16* x = nullptr;   // [rows, dim] or null
  bf16* residual = nullptr;  // [rows, dim]
  const bf16* weight = nullptr;
  float eps = 1e-6f;
  fp8* out = nullptr;      // [rows, dim]
  float* scale = nullptr;  // [rows]
  int rows = 0;
  int dim = 0;
  const float* static_scale = nullptr;  // [1] on the device, or null: dynamic per-row scales
};
Status LaunchAddRmsNormFp8(const AddRmsNormFp8Params& p, cudaStream_t stream);

// LaunchSiluMul (ops.h) with a quantised output: v[r, i] = silu(g) * u in fp32 with g, u =
// gate_up[r, i], gate_up[r, inter + i]; then q, scale from v.
struct SiluMulFp8Params {
  const bf16* gate_up = nullptr;  // [rows, 2 * inter]
  fp8* out = nullptr;             // [rows, inter]
  float* scale = nullptr;         // [rows]
  int rows = 0;
  int inter = 0;
  const float* static_scale = nullptr;  // [1] on the device, or null: dynamic per-row scales
};
Status LaunchSiluMulFp8(const SiluMulFp8Params& p, cudaStream_t stream);

// petal calibrate on the CUDA engine: out[r] = max_i |in[r, i]| of bf16 rows (the per-token
// maxima the fp8 ops would compute), for the activation observer. Same launch rules.
struct RowAmaxParams {
  const bf16* in = nullptr;  // [rows, dim]
  float* out = nullptr;      // [rows]
  int rows = 0;
  int dim = 0;
};
Status LaunchRowAmaxBf16(const RowAmaxParams& p, cudaStream_t stream);

// CPU reference of the quantisation formula for fp32 rows: q as raw e4m3 bytes.
void QuantizeRowsFp8Host(const float* in, int rows, int dim, uint8_t* q, float* scale);
// CPU reference of the static formula: every row with dequantisation scale `s`.
void QuantizeRowsFp8StaticHost(const float* in, int rows, int dim, float s, uint8_t* q,
                               float* scale);
// Raw e4m3 byte to float (host).
float Fp8ToFloatHost(uint8_t q);

}  // namespace petal::cuda
