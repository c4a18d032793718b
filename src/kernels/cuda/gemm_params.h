// What one dense-layer product computes (GemmParams) and the smallest M of its fp8 path: the
// problem description shared by the cuBLASLt wrapper (gemm.h) and our own GEMM kernels
// (gemm_smallm.h, gemm_cluster.h, gemm_wgmma.h, the CUTLASS candidates). Kept apart from gemm.h
// so that those kernels' translation units do not recompile when the wrapper's options change.
// Thread-safety: plain data.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

namespace petal::cuda {

// out = epilogue(a * w^T + c + bias).
struct GemmParams {
  const __nv_bfloat16* a = nullptr;  // [m, k] row-major activations
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major weights (PyTorch Linear layout)
  // [n] bf16, or null. bf16 because the weights are stored in bf16 and cuBLASLt's bias type for a
  // bf16 output with fp32 compute is bf16; it is added in fp32 before the output is rounded.
  const __nv_bfloat16* bias = nullptr;
  // [m, n] addend with beta = 1 (e.g. the residual stream), or null. May equal out (in place).
  const __nv_bfloat16* c = nullptr;
  __nv_bfloat16* out = nullptr;  // [m, n] row-major
  int m = 0, n = 0, k = 0;
  // Apply GELU after bias. cuBLASLt's GELU epilogue is the tanh approximation
  // 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (cuBLAS does not document the formula; PyTorch's
  // decomposition of _addmm_activation, which uses this epilogue on CUDA, is
  // gelu(approximate="tanh")), NOT the erf GELU that BERT checkpoints use: for those run the bias
  // epilogue, then LaunchGelu (ops.h). The two differ by at most 4.7e-4 absolute.
  bool gelu_tanh = false;
  // FP8 (e4m3) operands instead of a and w (both set, a and w then ignored): out = (a_scale[m] *
  // w_scale[n]) * (a8 w8^T) + c + bias, fp32 accumulation, bf16 out. Scales are dequantisation
  // factors in device memory (per token, per output channel: cuBLASLt's outer-vector scaling), so
  // a captured graph reads new scales on replay. gelu_tanh is not supported with fp8.
  const __nv_fp8_e4m3* a8 = nullptr;  // [m, k]
  const __nv_fp8_e4m3* w8 = nullptr;  // [n, k]
  const float* a_scale = nullptr;     // [m]
  const float* w_scale = nullptr;     // [n]
  bool fp8() const { return a8 != nullptr || w8 != nullptr; }
};

// Smallest M the fp8 path accepts. On the H200 with cuBLASLt 13.1, fp8_gpu_test found the
// outer-vector-scaled kernels the heuristic picks for M <= 128 giving wrong results (rows written
// only in part, or the addend counted wrongly), while M = 2048 matched float64 on every model
// shape; M in between was not tested in isolation. Below this, use bf16 (the engine does).
inline constexpr int kFp8MinM = 2048;

}  // namespace petal::cuda
