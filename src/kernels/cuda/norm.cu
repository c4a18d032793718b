// Fused residual-add + LayerNorm / RMSNorm, and the BERT embedding sum + LayerNorm: one block per
// row, the row staged as fp32 in shared memory so the input is read from device memory once and
// the variance is computed in a second pass over shared memory (two-pass: no cancellation). All
// three also have a warp-per-row layout (rows_per_block 2-8, ops.h): the row in registers, the
// same two passes over them, statistics by warp shuffles.
#include <optional>

#include "common/env.h"
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

// The warp-per-row layout's second half: lane l holds the row's 8-value chunks l, l + 32, ...
// in v (chunks past dim unused), with its share of the row's sum and sum of squares; writes
// out[0, dim) = norm(row) for the chunks it holds. Every lane of the warp must call it.
template <int kChunks, bool kLayerNorm>
__device__ __forceinline__ void NormalizeWarpRow(const float (&v)[kChunks][8], float sum,
                                                 float sumsq, const bf16* gamma, const bf16* beta,
                                                 float eps, int dim, bf16* out) {
  const int lane = threadIdx.x & 31;
  float mean = 0.f, inv;
  if constexpr (kLayerNorm) {
    mean = WarpSum(sum) / dim;
    float sq = 0.f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if ((c * 32 + lane) * 8 >= dim) break;
#pragma unroll
      for (int j = 0; j < 8; ++j) sq += (v[c][j] - mean) * (v[c][j] - mean);
    }
    inv = rsqrtf(WarpSum(sq) / dim + eps);
  } else {
    inv = rsqrtf(WarpSum(sumsq) / dim + eps);
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = (c * 32 + lane) * 8;
    if (i >= dim) break;
    float g[8], be[8], o[8];
    LoadBf16<8>(gamma + i, g);
    if constexpr (kLayerNorm) LoadBf16<8>(beta + i, be);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      o[j] = (v[c][j] - mean) * inv * g[j];
      if constexpr (kLayerNorm) o[j] += be[j];
    }
    StoreBf16<8>(out + i, o);
  }
}

// One warp per row, blockDim.x / 32 rows a block. Lane l owns the 8-value chunks l, l + 32, ...
// (kChunks of them, the last ones possibly past dim), loaded once into registers; it writes only
// what it read, so out, sum_out and the inputs may alias as in AddNormKernel. dim % 8 == 0,
// dim <= 256 kChunks, pointers 16-byte aligned.
template <int kChunks, bool kLayerNorm>
__global__ void __launch_bounds__(256)
    AddNormWarpKernel(const bf16* a, const bf16* b, bf16* sum_out, const bf16* gamma,
                      const bf16* beta, float eps, bf16* out, int rows, int dim) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warp: no block barrier below
  const int64_t base = row * dim;
  float v[kChunks][8];
  float sum = 0.f, sumsq = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = (c * 32 + lane) * 8;
    if (i >= dim) break;  // later chunks are further out
    LoadBf16<8>(a + base + i, v[c]);
    if (b != nullptr) {
      float w[8];
      LoadBf16<8>(b + base + i, w);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[c][j] = RoundBf16(v[c][j] + w[j]);
      if (sum_out != nullptr) StoreBf16<8>(sum_out + base + i, v[c]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sum += v[c][j];
      sumsq += v[c][j] * v[c][j];
    }
  }
  NormalizeWarpRow<kChunks, kLayerNorm>(v, sum, sumsq, gamma, beta, eps, dim, out + base);
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

// The warp-per-row layout of BertEmbeddingKernel (as AddNormWarpKernel): dim % 8 == 0,
// dim <= 256 kChunks, tables, gamma, beta and out 16-byte aligned.
template <int kChunks>
__global__ void __launch_bounds__(256) BertEmbeddingWarpKernel(BertEmbeddingParams p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (t >= p.rows) return;  // whole warp: no block barrier below
  const int64_t dim = p.dim;
  const bf16* w = p.word + Clamp(p.ids[t], p.vocab) * dim;
  const bf16* ps = p.pos + Clamp(p.positions[t] + p.position_offset, p.max_positions) * dim;
  const bf16* ty = p.type + (p.type_ids ? Clamp(p.type_ids[t], p.num_types) : 0) * dim;
  float v[kChunks][8];
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int i = (c * 32 + lane) * 8;
    if (i >= p.dim) break;
    float b[8], e[8];
    LoadBf16<8>(w + i, v[c]);
    LoadBf16<8>(ps + i, b);
    LoadBf16<8>(ty + i, e);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[c][j] = v[c][j] + b[j] + e[j];  // BertEmbeddingKernel's order
      sum += v[c][j];
    }
  }
  NormalizeWarpRow<kChunks, true>(v, sum, 0.f, p.gamma, p.beta, p.eps, p.dim, p.out + t * dim);
}

Status CheckRowDims(const char* op, int rows, int dim) {
  if (rows < 0 || dim <= 0 || dim > kMaxNormDim)
    return BadArg(op, "need rows >= 0 and 0 < dim <= 12288, got rows=" + std::to_string(rows) +
                          " dim=" + std::to_string(dim));
  return Status::Ok();
}

// Rows no wider than this take the warp-per-row layout by default (ops.h, "rows_per_block").
constexpr int kWarpRowsMaxDim = 512;

// rows_per_block 0 -> the process default (ops.h): PETAL_NORM_ROWS_PER_BLOCK (read once), else
// by width.
int RowsPerBlock(int requested, int dim) {
  static const int process_default = [] {
    const std::optional<long long> v = EnvNonNegative("PETAL_NORM_ROWS_PER_BLOCK");
    return v && (*v == 1 || *v == 2 || *v == 4 || *v == 8) ? static_cast<int>(*v) : 0;
  }();
  if (requested != 0) return requested;
  if (process_default != 0) return process_default;
  return dim <= kWarpRowsMaxDim ? 4 : 1;
}

bool ValidRowsPerBlock(int r) { return r == 0 || r == 1 || r == 2 || r == 4 || r == 8; }

template <int kChunks, bool kLayerNorm>
void LaunchAddNormWarp(int rows_per_block, const bf16* a, const bf16* b, bf16* sum_out,
                       const bf16* gamma, const bf16* beta, float eps, bf16* out, int rows, int dim,
                       cudaStream_t stream) {
  const int blocks = (rows + rows_per_block - 1) / rows_per_block;
  (void)LaunchPdl(AddNormWarpKernel<kChunks, kLayerNorm>, blocks, 32 * rows_per_block, 0, stream, a,
                  b, sum_out, gamma, beta, eps, out, rows, dim);
}

template <bool kLayerNorm>
Status LaunchAddNorm(const char* op, const bf16* a, const bf16* b, bf16* sum_out, const bf16* gamma,
                     const bf16* beta, float eps, bf16* out, int rows, int dim, int rows_per_block,
                     cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(CheckRowDims(op, rows, dim));
  if (!ValidRowsPerBlock(rows_per_block))
    return BadArg(op, "rows_per_block must be 0 (the default), 1, 2, 4 or 8");
  if (rows == 0) return Status::Ok();
  const int vec = ChooseVec({dim}, {a, b, sum_out, gamma, beta, out});
  if (vec == 0) return BadArg(op, "dim must be even and pointers 4-byte aligned");
  const int per_block = RowsPerBlock(rows_per_block, dim);
  if (per_block > 1 && vec == 8 && dim <= 1024) {
    const int chunks = (dim + 255) / 256;  // 16-byte chunks a lane
    auto* launch = chunks == 1   ? &LaunchAddNormWarp<1, kLayerNorm>
                   : chunks == 2 ? &LaunchAddNormWarp<2, kLayerNorm>
                   : chunks == 3 ? &LaunchAddNormWarp<3, kLayerNorm>
                                 : &LaunchAddNormWarp<4, kLayerNorm>;
    launch(per_block, a, b, sum_out, gamma, beta, eps, out, rows, dim, stream);
    PETAL_CUDA_CHECK_LAUNCH(op);
    return Status::Ok();
  }
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
                             p.out, p.rows, p.dim, p.rows_per_block, stream);
}

Status LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream) {
  if (!p.residual || !p.weight || !p.out) return BadArg("AddRmsNorm", "null pointer");
  if (p.x && (p.out == p.residual || p.out == p.x))
    return BadArg("AddRmsNorm", "out must not alias residual or x when x is given");
  return LaunchAddNorm<false>("AddRmsNorm", p.residual, p.x, p.x ? p.residual : nullptr, p.weight,
                              nullptr, p.eps, p.out, p.rows, p.dim, p.rows_per_block, stream);
}

Status LaunchBertEmbedding(const BertEmbeddingParams& p, cudaStream_t stream) {
  const char* op = "BertEmbedding";
  if (!p.ids || !p.positions || !p.word || !p.pos || !p.type || !p.gamma || !p.beta || !p.out)
    return BadArg(op, "null pointer");
  if (p.vocab <= 0 || p.max_positions <= 0 || p.num_types <= 0)
    return BadArg(op, "empty embedding table");
  PETAL_RETURN_IF_ERROR(CheckRowDims(op, p.rows, p.dim));
  if (!ValidRowsPerBlock(p.rows_per_block))
    return BadArg(op, "rows_per_block must be 0 (the default), 1, 2, 4 or 8");
  if (p.rows == 0) return Status::Ok();
  const int vec = ChooseVec({p.dim}, {p.word, p.pos, p.type, p.gamma, p.beta, p.out});
  if (vec == 0) return BadArg(op, "dim must be even and pointers 4-byte aligned");
  const int per_block = RowsPerBlock(p.rows_per_block, p.dim);
  if (per_block > 1 && vec == 8 && p.dim <= 1024) {
    const int chunks = (p.dim + 255) / 256, blocks = (p.rows + per_block - 1) / per_block;
    auto* kernel = chunks == 1   ? &BertEmbeddingWarpKernel<1>
                   : chunks == 2 ? &BertEmbeddingWarpKernel<2>
                   : chunks == 3 ? &BertEmbeddingWarpKernel<3>
                                 : &BertEmbeddingWarpKernel<4>;
    (void)LaunchPdl(kernel, blocks, 32 * per_block, 0, stream, p);
    PETAL_CUDA_CHECK_LAUNCH(op);
    return Status::Ok();
  }
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
