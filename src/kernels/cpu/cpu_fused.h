// Fused row passes for the fast CPU path: residual add + norm in one pass over the rows, float
// accumulation (vectorised; the fp32 reference in ops.h accumulates in double), and rotary
// embedding from a cos/sin table built once per forward instead of per token. The norms have an
// AVX-512 variant beside the build's AVX2 one, picked at run time (DetectCpuFeatures(), so
// PETAL_CPU_ISA caps it); both sum in the same order.
// Thread-safety: pure functions over caller buffers (OpenMP inside); RopeTable is immutable once
// built.
#pragma once

#include <cstdint>
#include <vector>

namespace petal::cpu {

// x[r,:] = LayerNorm(x[r,:] + res[r,:]) * gamma + beta (res may be null: plain LayerNorm); with
// out_bf16, also the result rounded to bf16 there ([rows, dim]: the next bf16 GEMM's input).
void AddLayerNorm(float* x, const float* res, const float* gamma, const float* beta, float eps,
                  int rows, int dim, uint16_t* out_bf16 = nullptr);

// x[r,:] += res[r,:] (res may be null), then out[r,:] = x[r,:] / rms(x[r,:]) * weight.
void AddRmsNorm(float* x, const float* res, const float* weight, float eps, float* out, int rows,
                int dim);

// In place on `rows` rows of `heads` vectors of `dim` floats each (row stride `row_stride`):
// v = v / rms(v) * weight per head (Qwen3's q/k norm).
void HeadRmsNorm(float* x, int row_stride, int rows, int heads, int dim, const float* weight,
                 float eps);

// cos/sin of pos * theta^(-2j/head_dim) for pos < positions, j < head_dim / 2, computed in
// double and rounded, as ops.h's Rope does per token.
struct RopeTable {
  RopeTable(int positions, int head_dim, double theta);
  int half = 0;
  std::vector<float> cos, sin;  // [positions, half]
};

// ops.h's Rope (rotate-half, positions restarting per sequence) from the table, for q heads at
// column 0 and k heads right after them (q_heads + k_heads heads of head_dim per row).
void RopeQK(float* x, int row_stride, int q_heads, int k_heads, int head_dim,
            const int32_t* cu_seqlens, int num_seqs, const RopeTable& table);

}  // namespace petal::cpu
