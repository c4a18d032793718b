// Fused residual-add + LayerNorm / RMSNorm, and the BERT embedding sum + LayerNorm: one block per
// row, the row staged as fp32 in shared memory so the input is read from device memory once and
// the variance is computed in a second pass over shared memory (two-pass: no cancellation).
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

// Thread `tid` owns the chunks i = tid*kVec + k*blockDim.x*kVec of the row; every pass below uses
// that same ownership, so a thread only ever reads back shared-memory values it wrote itself and
// needs no barrier besides the ones inside BlockSum. Because of that, the shared-memory layout is
// free: value j of chunk c lives at row[j * (dim / kVec) + c], so a warp touches 32 consecutive
// words per access (no bank conflicts; the natural layout would be 8-way conflicted for kVec 8).
__device__ __forceinline__ int Slot(int i, int j, int kvec, int dim) {
  return j * (dim / kvec) + i / kvec;
}

template <int kVec, bool kLayerNorm>
__device__ __forceinline__ void NormalizeRow(const float* row, float sum, float sumsq,
                                             const bf16* gamma, const bf16* beta, float eps,
                                             int dim, bf16* out, float* scratch) {
  const int step = blockDim.x * kVec;
  float mean = 0.f, inv;
  if constexpr (kLayerNorm) {
    mean = BlockSum(sum, scratch) / dim;
    float sq = 0.f;
    for (int i = threadIdx.x * kVec; i < dim; i += step) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float d = row[Slot(i, j, kVec, dim)] - mean;
        sq += d * d;
      }
    }
    inv = rsqrtf(BlockSum(sq, scratch) / dim + eps);
  } else {
    inv = rsqrtf(BlockSum(sumsq, scratch) / dim + eps);
  }
  for (int i = threadIdx.x * kVec; i < dim; i += step) {
    float g[kVec], b[kVec], o[kVec];
    LoadBf16<kVec>(gamma + i, g);
    if constexpr (kLayerNorm) LoadBf16<kVec>(beta + i, b);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      o[j] = (row[Slot(i, j, kVec, dim)] - mean) * inv * g[j];
      if constexpr (kLayerNorm) o[j] += b[j];
    }
    StoreBf16<kVec>(out + i, o);
  }
}

// row = a (+ b, rounded to bf16 and written to sum_out if non-null); out = norm(row).
template <int kVec, bool kLayerNorm>
__global__ void AddNormKernel(const bf16* a, const bf16* b, bf16* sum_out, const bf16* gamma,
                              const bf16* beta, float eps, bf16* out, int dim) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.f, sumsq = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    LoadBf16<kVec>(a + base + i, v);
    if (b != nullptr) {
      float w[kVec];
      LoadBf16<kVec>(b + base + i, w);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = RoundBf16(v[j] + w[j]);
      if (sum_out != nullptr) StoreBf16<kVec>(sum_out + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      row[Slot(i, j, kVec, dim)] = v[j];
      sum += v[j];
      sumsq += v[j] * v[j];
    }
  }
  NormalizeRow<kVec, kLayerNorm>(row, sum, sumsq, gamma, beta, eps, dim, out + base, scratch);
}

__device__ __forceinline__ int Clamp(int v, int n) { return v < 0 ? 0 : (v >= n ? n - 1 : v); }

template <int kVec>
__global__ void BertEmbeddingKernel(BertEmbeddingParams p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int t = blockIdx.x;
  const int64_t dim = p.dim;
  const bf16* w = p.word + Clamp(p.ids[t], p.vocab) * dim;
  const bf16* ps = p.pos + Clamp(p.positions[t] + p.position_offset, p.max_positions) * dim;
  const bf16* ty = p.type + (p.type_ids ? Clamp(p.type_ids[t], p.num_types) : 0) * dim;
  float sum = 0.f;
  for (int i = threadIdx.x * kVec; i < p.dim; i += blockDim.x * kVec) {
    float a[kVec], b[kVec], c[kVec];
    LoadBf16<kVec>(w + i, a);
    LoadBf16<kVec>(ps + i, b);
    LoadBf16<kVec>(ty + i, c);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float v = a[j] + b[j] + c[j];
      row[Slot(i, j, kVec, p.dim)] = v;
      sum += v;
    }
  }
  NormalizeRow<kVec, true>(row, sum, 0.f, p.gamma, p.beta, p.eps, p.dim, p.out + t * dim, scratch);
}

Status CheckRowDims(const char* op, int rows, int dim) {
  if (rows < 0 || dim <= 0 || dim > kMaxNormDim)
    return BadArg(op, "need rows >= 0 and 0 < dim <= 12288, got rows=" + std::to_string(rows) +
                          " dim=" + std::to_string(dim));
  return Status::Ok();
}

template <bool kLayerNorm>
Status LaunchAddNorm(const char* op, const bf16* a, const bf16* b, bf16* sum_out, const bf16* gamma,
                     const bf16* beta, float eps, bf16* out, int rows, int dim,
                     cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(CheckRowDims(op, rows, dim));
  if (rows == 0) return Status::Ok();
  const int vec = ChooseVec({dim}, {a, b, sum_out, gamma, beta, out});
  if (vec == 0) return BadArg(op, "dim must be even and pointers 4-byte aligned");
  const int threads = RowThreads(dim, vec);
  const size_t smem = static_cast<size_t>(dim) * sizeof(float);
  if (vec == 8) {
    (void)LaunchPdl(AddNormKernel<8, kLayerNorm>, rows, threads, smem, stream, a, b, sum_out, gamma,
                    beta, eps, out, dim);
  } else {
    (void)LaunchPdl(AddNormKernel<2, kLayerNorm>, rows, threads, smem, stream, a, b, sum_out, gamma,
                    beta, eps, out, dim);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace

Status LaunchAddLayerNorm(const AddLayerNormParams& p, cudaStream_t stream) {
  if (!p.x || !p.gamma || !p.beta || !p.out) return BadArg("AddLayerNorm", "null pointer");
  return LaunchAddNorm<true>("AddLayerNorm", p.x, p.residual, nullptr, p.gamma, p.beta, p.eps,
                             p.out, p.rows, p.dim, stream);
}

Status LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream) {
  if (!p.residual || !p.weight || !p.out) return BadArg("AddRmsNorm", "null pointer");
  if (p.x && (p.out == p.residual || p.out == p.x))
    return BadArg("AddRmsNorm", "out must not alias residual or x when x is given");
  return LaunchAddNorm<false>("AddRmsNorm", p.residual, p.x, p.x ? p.residual : nullptr, p.weight,
                              nullptr, p.eps, p.out, p.rows, p.dim, stream);
}

Status LaunchBertEmbedding(const BertEmbeddingParams& p, cudaStream_t stream) {
  const char* op = "BertEmbedding";
  if (!p.ids || !p.positions || !p.word || !p.pos || !p.type || !p.gamma || !p.beta || !p.out)
    return BadArg(op, "null pointer");
  if (p.vocab <= 0 || p.max_positions <= 0 || p.num_types <= 0)
    return BadArg(op, "empty embedding table");
  PETAL_RETURN_IF_ERROR(CheckRowDims(op, p.rows, p.dim));
  if (p.rows == 0) return Status::Ok();
  const int vec = ChooseVec({p.dim}, {p.word, p.pos, p.type, p.gamma, p.beta, p.out});
  if (vec == 0) return BadArg(op, "dim must be even and pointers 4-byte aligned");
  const int threads = RowThreads(p.dim, vec);
  const size_t smem = static_cast<size_t>(p.dim) * sizeof(float);
  if (vec == 8) {
    (void)LaunchPdl(BertEmbeddingKernel<8>, p.rows, threads, smem, stream, p);
  } else {
    (void)LaunchPdl(BertEmbeddingKernel<2>, p.rows, threads, smem, stream, p);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace petal::cuda
