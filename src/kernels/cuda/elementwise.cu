// Memory-bound elementwise and gather ops: per-token sequence info, the Qwen3 embedding gather,
// SwiGLU (and its interleaved-layout variant with the weight interleave of gemm_fused.h), exact
// GELU and dtype conversions. Grid sizes depend only on element counts (capacity),
// with grid-stride loops capped at a few waves so huge tensors do not launch millions of blocks.
#include <algorithm>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_fused.h"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kThreads = 256;
// 132 SMs x 8 resident blocks of 256 threads x 2 waves: enough loads in flight for HBM.
constexpr int64_t kMaxBlocks = 132 * 8 * 2;

int GridFor(int64_t work_items) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((work_items + kThreads - 1) / kThreads, kMaxBlocks)));
}

__global__ void SeqInfoKernel(const int32_t* __restrict__ cu, int num_seqs, int rows,
                              int32_t* __restrict__ seq_ids, int32_t* __restrict__ positions) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows) return;
  int sid = -1, pos = 0;
  if (num_seqs > 0 && t >= cu[0] && t < cu[num_seqs]) {
    // Largest s in [0, num_seqs) with cu[s] <= t; empty sequences (cu[s] == cu[s+1]) before it
    // are skipped because a later s with the same offset also satisfies cu[s] <= t.
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (cu[mid] <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    sid = lo;
    pos = t - cu[lo];
  }
  if (seq_ids) seq_ids[t] = sid;
  if (positions) positions[t] = pos;
}

template <int kVec>
__global__ void EmbeddingKernel(const int32_t* __restrict__ ids, const bf16* __restrict__ table,
                                int vocab, bf16* __restrict__ out, int rows, int dim) {
  PdlWait();  // see pdl.cuh: before any global memory access
  using Raw = typename VecRaw<kVec>::Type;
  const int vecs_per_row = dim / kVec;
  const int64_t total = static_cast<int64_t>(rows) * vecs_per_row;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < total;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = v / vecs_per_row;
    const int c = static_cast<int>(v - r * vecs_per_row) * kVec;
    const int id = ids[r];
    Raw raw{};  // zeros for an invalid id
    if (id >= 0 && id < vocab)
      raw = *reinterpret_cast<const Raw*>(table + static_cast<int64_t>(id) * dim + c);
    *reinterpret_cast<Raw*>(out + r * dim + c) = raw;
  }
}

__device__ __forceinline__ float Silu(float g) { return g / (1.f + expf(-g)); }

template <int kVec>
__global__ void SiluMulKernel(const bf16* __restrict__ gate_up, bf16* __restrict__ out, int rows,
                              int inter) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int vecs_per_row = inter / kVec;
  const int64_t total = static_cast<int64_t>(rows) * vecs_per_row;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < total;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = v / vecs_per_row;
    const int c = static_cast<int>(v - r * vecs_per_row) * kVec;
    const bf16* g_ptr = gate_up + r * 2 * inter + c;
    float g[kVec], u[kVec], o[kVec];
    LoadBf16<kVec>(g_ptr, g);
    LoadBf16<kVec>(g_ptr + inter, u);
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] = Silu(g[j]) * u[j];
    StoreBf16<kVec>(out + r * inter + c, o);
  }
}

template <int kVec>
__global__ void GeluKernel(const bf16* x, bf16* out, int64_t n) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int64_t total = n / kVec;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < total;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float a[kVec];
    LoadBf16<kVec>(x + v * kVec, a);
#pragma unroll
    for (int j = 0; j < kVec; ++j) a[j] = 0.5f * a[j] * (1.f + erff(a[j] * 0.70710678118654752f));
    StoreBf16<kVec>(out + v * kVec, a);
  }
}

__global__ void F32ToBf16Kernel(const float* __restrict__ in, bf16* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void Bf16ToF32Kernel(const bf16* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

// One thread per 16 bytes (8 values) of an output row.
__global__ void InterleaveKernel(const bf16* __restrict__ in, bf16* __restrict__ out, int inter,
                                 int k) {
  const int vecs = k / 8;
  const int64_t total = static_cast<int64_t>(2 * inter) * vecs;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < total;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = v / vecs;
    const int c = static_cast<int>(v - row * vecs) * 8;
    const int64_t src = (row & 1) ? inter + row / 2 : row / 2;
    *reinterpret_cast<uint4*>(out + row * k + c) =
        *reinterpret_cast<const uint4*>(in + src * k + c);
  }
}

// kVec output values per step from 2 * kVec interleaved inputs.
template <int kVec>
__global__ void SiluMulInterleavedKernel(const bf16* __restrict__ gu, bf16* __restrict__ out,
                                         int rows, int inter) {
  PdlWait();  // see pdl.cuh: before any global memory access
  const int vecs_per_row = inter / kVec;
  const int64_t total = static_cast<int64_t>(rows) * vecs_per_row;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < total;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = v / vecs_per_row;
    const int c = static_cast<int>(v - r * vecs_per_row) * kVec;
    float in[2 * kVec], o[kVec];
    LoadBf16<kVec>(gu + r * 2 * inter + 2 * c, *reinterpret_cast<float(*)[kVec]>(in));
    LoadBf16<kVec>(gu + r * 2 * inter + 2 * c + kVec, *reinterpret_cast<float(*)[kVec]>(in + kVec));
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] = Silu(in[2 * j]) * in[2 * j + 1];
    StoreBf16<kVec>(out + r * inter + c, o);
  }
}

}  // namespace

Status LaunchSeqInfo(const SeqInfoParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.num_seqs < 0) return BadArg("SeqInfo", "negative size");
  if (p.num_seqs > 0 && !p.cu_seqlens) return BadArg("SeqInfo", "null cu_seqlens");
  if (p.rows == 0 || (!p.seq_ids && !p.positions)) return Status::Ok();
  (void)LaunchPdl(SeqInfoKernel, (p.rows + kThreads - 1) / kThreads, kThreads, 0, stream,
                  p.cu_seqlens, p.num_seqs, p.rows, p.seq_ids, p.positions);
  PETAL_CUDA_CHECK_LAUNCH("SeqInfo");
  return Status::Ok();
}

Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (!p.ids || !p.table || !p.out) return BadArg("Embedding", "null pointer");
  if (p.rows < 0 || p.dim <= 0 || p.vocab <= 0) return BadArg("Embedding", "bad sizes");
  if (p.rows == 0) return Status::Ok();
  const int vec = ChooseVec({p.dim}, {p.table, p.out});
  if (vec == 0) return BadArg("Embedding", "dim must be even and pointers 4-byte aligned");
  const int64_t work = static_cast<int64_t>(p.rows) * (p.dim / vec);
  if (vec == 8) {
    (void)LaunchPdl(EmbeddingKernel<8>, GridFor(work), kThreads, 0, stream, p.ids, p.table, p.vocab,
                    p.out, p.rows, p.dim);
  } else {
    (void)LaunchPdl(EmbeddingKernel<2>, GridFor(work), kThreads, 0, stream, p.ids, p.table, p.vocab,
                    p.out, p.rows, p.dim);
  }
  PETAL_CUDA_CHECK_LAUNCH("Embedding");
  return Status::Ok();
}

Status LaunchSiluMul(const SiluMulParams& p, cudaStream_t stream) {
  if (!p.gate_up || !p.out) return BadArg("SiluMul", "null pointer");
  if (p.rows < 0 || p.inter <= 0) return BadArg("SiluMul", "bad sizes");
  if (p.rows == 0) return Status::Ok();
  const int vec = ChooseVec({p.inter}, {p.gate_up, p.out});
  if (vec == 0) return BadArg("SiluMul", "inter must be even and pointers 4-byte aligned");
  const int64_t work = static_cast<int64_t>(p.rows) * (p.inter / vec);
  if (vec == 8) {
    (void)LaunchPdl(SiluMulKernel<8>, GridFor(work), kThreads, 0, stream, p.gate_up, p.out, p.rows,
                    p.inter);
  } else {
    (void)LaunchPdl(SiluMulKernel<2>, GridFor(work), kThreads, 0, stream, p.gate_up, p.out, p.rows,
                    p.inter);
  }
  PETAL_CUDA_CHECK_LAUNCH("SiluMul");
  return Status::Ok();
}

Status LaunchGelu(const GeluParams& p, cudaStream_t stream) {
  if (!p.x || !p.out) return BadArg("Gelu", "null pointer");
  if (p.n < 0) return BadArg("Gelu", "negative n");
  if (p.n == 0) return Status::Ok();
  const int vec = ChooseVec({p.n}, {p.x, p.out});
  if (vec == 0) return BadArg("Gelu", "n must be even and pointers 4-byte aligned");
  if (vec == 8) {
    (void)LaunchPdl(GeluKernel<8>, GridFor(p.n / 8), kThreads, 0, stream, p.x, p.out, p.n);
  } else {
    (void)LaunchPdl(GeluKernel<2>, GridFor(p.n / 2), kThreads, 0, stream, p.x, p.out, p.n);
  }
  PETAL_CUDA_CHECK_LAUNCH("Gelu");
  return Status::Ok();
}

Status LaunchF32ToBf16(const float* in, bf16* out, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!in || !out))) return BadArg("F32ToBf16", "bad arguments");
  if (n == 0) return Status::Ok();
  F32ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(in, out, n);
  PETAL_CUDA_CHECK_LAUNCH("F32ToBf16");
  return Status::Ok();
}

Status LaunchBf16ToF32(const bf16* in, float* out, int64_t n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && (!in || !out))) return BadArg("Bf16ToF32", "bad arguments");
  if (n == 0) return Status::Ok();
  Bf16ToF32Kernel<<<GridFor(n), kThreads, 0, stream>>>(in, out, n);
  PETAL_CUDA_CHECK_LAUNCH("Bf16ToF32");
  return Status::Ok();
}

Status LaunchInterleaveGateUp(const InterleaveGateUpParams& p, cudaStream_t stream) {
  if (!p.in || !p.out) return BadArg("InterleaveGateUp", "null pointer");
  if (p.inter <= 0 || p.k <= 0 || p.k % 8) return BadArg("InterleaveGateUp", "bad sizes");
  if (!IsAligned(p.in, 16) || !IsAligned(p.out, 16))
    return BadArg("InterleaveGateUp", "pointers must be 16-byte aligned");
  if (p.in == p.out) return BadArg("InterleaveGateUp", "out must not alias in");
  InterleaveKernel<<<GridFor(static_cast<int64_t>(2 * p.inter) * (p.k / 8)), kThreads, 0,
                     stream>>>(p.in, p.out, p.inter, p.k);
  PETAL_CUDA_CHECK_LAUNCH("InterleaveGateUp");
  return Status::Ok();
}

Status LaunchSiluMulInterleaved(const SiluMulParams& p, cudaStream_t stream) {
  if (!p.gate_up || !p.out) return BadArg("SiluMulInterleaved", "null pointer");
  if (p.rows < 0 || p.inter <= 0) return BadArg("SiluMulInterleaved", "bad sizes");
  if (p.rows == 0) return Status::Ok();
  const int vec = ChooseVec({p.inter}, {p.gate_up, p.out});
  if (vec == 0)
    return BadArg("SiluMulInterleaved", "inter must be even and pointers 4-byte aligned");
  const int64_t work = static_cast<int64_t>(p.rows) * (p.inter / vec);
  if (vec == 8) {
    (void)LaunchPdl(SiluMulInterleavedKernel<8>, GridFor(work), kThreads, 0, stream, p.gate_up,
                    p.out, p.rows, p.inter);
  } else {
    (void)LaunchPdl(SiluMulInterleavedKernel<2>, GridFor(work), kThreads, 0, stream, p.gate_up,
                    p.out, p.rows, p.inter);
  }
  PETAL_CUDA_CHECK_LAUNCH("SiluMulInterleaved");
  return Status::Ok();
}

}  // namespace petal::cuda
