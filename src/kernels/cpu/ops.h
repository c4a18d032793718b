// CPU reference ops in fp32: the CPU engine's building blocks, and the reference every CUDA
// kernel in src/kernels/cuda is tested against. Each op documents the exact function it computes;
// the CUDA kernel of the same name computes the same function in bf16/fp32.
//
// Layout conventions: row-major; activations are [tokens, features]; weights are PyTorch Linear
// layout [out_features, in_features]. Ragged batches are described by cu_seqlens
// (num_seqs + 1 offsets into the token dimension). Thread-safety: ops are pure functions over
// caller-owned buffers; they may parallelise internally (OpenMP / BLAS threads).
#pragma once

#include <cstdint>

namespace petal::cpu {

// y[M,N] = x[M,K] * w[N,K]^T (+ bias[N] if non-null). Uses the BLAS.
void Gemm(const float* x, const float* w, const float* bias, float* y, int m, int n, int k);

// out[r,:] = (x[r,:] - mean) / sqrt(var + eps) * gamma + beta, for r < rows. out may alias x.
void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, float* out,
               int rows, int dim);
// out[r,:] = x[r,:] / sqrt(mean(x^2) + eps) * weight. out may alias x.
void RmsNorm(const float* x, const float* weight, float eps, float* out, int rows, int dim);
// x += r, elementwise over n values.
void AddInPlace(float* x, const float* r, int64_t n);

// Exact (erf) GELU: x * 0.5 * (1 + erf(x / sqrt(2))), in place; erf is evaluated to within
// 2e-7 absolute by a vectorisable polynomial rather than libm's scalar erff.
void Gelu(float* x, int64_t n);
// SwiGLU: out[r,i] = silu(gate_up[r,i]) * gate_up[r, inter + i], gate_up is [rows, 2*inter].
void SiluMul(const float* gate_up, float* out, int rows, int inter);

// Rotary embedding, rotate-half (GPT-NeoX / Qwen) convention, in place on x[tokens, heads,
// head_dim] with row stride `row_stride` floats between tokens. Position = index within its
// sequence (restarts at 0 for every sequence). inv_freq[j] = theta^(-2j/head_dim).
void Rope(float* x, int row_stride, int heads, int head_dim, const int32_t* cu_seqlens,
          int num_seqs, double theta);

// Ragged multi-head attention with grouped-query heads (num_heads % num_kv_heads == 0).
// q: [T, num_heads, d] with row stride q_stride; k, v: [T, num_kv_heads, d] with strides
// k_stride / v_stride; out: [T, num_heads, d] contiguous. Each sequence attends only within
// itself; causal restricts key j <= query i. softmax(q k^T * scale) v in fp32. kv_lens (null =
// whole sequences; only without causal): per sequence, how many of its first tokens are keys
// (1..length); every token is still a query (a multi-vector model's query expansion tokens,
// which attend to the text while no token attends to them).
void Attention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
               int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs, int num_heads,
               int num_kv_heads, int head_dim, bool causal, float scale,
               const int32_t* kv_lens = nullptr);

enum class Pooling { kMean = 0, kCls = 1, kLastToken = 2 };
// out[s,:] = pool(hidden[cu_seqlens[s]:cu_seqlens[s+1], :]); optionally L2-normalised
// (x / max(||x||, 1e-12), as torch.nn.functional.normalize). An empty sequence gives zeros.
void Pool(const float* hidden, const int32_t* cu_seqlens, int num_seqs, int dim, Pooling mode,
          bool normalize, float* out);

}  // namespace petal::cpu
