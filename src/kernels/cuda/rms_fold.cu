// RMSNorm folded into the next GEMM (ops.h, "RMSNorm folded into the next GEMM"): the load-time
// weight fold (ScaleColumns) and the two consumers that apply each token's 1/rms, computed from
// the residual row in the same kernel: RmsScaledQkv (then QkNormRope's per-head norm and rotary,
// the same fp32 expressions as QkNormRopeVecKernel) and RmsScaledSiluMul. Both consumers run one
// block per token: the block reduces the residual row once, then its warps share the result.
#include <algorithm>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/head_norm_rope.cuh"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kBlock = 256;  // threads of the per-token kernels (8 warps)

__device__ __forceinline__ float SiluF(float g) { return g / (1.f + expf(-g)); }

// rsqrt(mean(r[0:dim]^2) + eps) for the block's row; dim % 8 == 0, r 16-byte aligned. Every
// thread of the block must call it (BlockSum has barriers).
__device__ __forceinline__ float RowInvRms(const bf16* r, int dim, float eps, float* scratch) {
  float ss = 0.f;
  for (int i = threadIdx.x * 8; i < dim; i += blockDim.x * 8) {
    float v[8];
    LoadBf16<8>(r + i, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
  }
  return rsqrtf(BlockSum(ss, scratch) / dim + eps);
}

constexpr int kWarps = kBlock / 32;
constexpr int kMaxHeadsPerWarp = 8;  // q + k + v heads <= kWarps * 8 = 64 (LaunchRmsScaledQkv)
constexpr int kSiluChunks = 2;       // vector chunks per thread loaded up front (more: a tail loop)

// At small batches these kernels are latency-bound, so each thread issues every load it needs
// (its heads' values, the norm weights, the rotary row, its share of r) before the first
// reduction: one memory round trip, not one per head.
template <int E>
__global__ void __launch_bounds__(kBlock) RmsScaledQkvKernel(RmsScaledQkvParams p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  __shared__ float scratch[32];
  const QkNormRopeParams& q = p.qk;
  constexpr int kDim = 32 * E, kHalf = kDim / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qk_heads = q.num_q_heads + q.num_kv_heads;
  const int heads = qk_heads + q.num_kv_heads;
  const int64_t t = blockIdx.x;
  bf16* row = q.qkv + t * q.row_stride;
  float v[kMaxHeadsPerWarp][E];
#pragma unroll
  for (int i = 0; i < kMaxHeadsPerWarp; ++i) {
    const int h = warp + i * kWarps;  // each warp takes whole heads: its sums stay warp-uniform
    if (h < heads) LoadBf16<E>(row + h * kDim + lane * E, v[i]);
  }
  float gq[E], gk[E];
  const bool norm = q.q_norm_weight != nullptr;
  if (norm) {
    LoadBf16<E>(q.q_norm_weight + lane * E, gq);
    LoadBf16<E>(q.k_norm_weight + lane * E, gk);
  }
  float2 cs[E];
  const bool rope = q.positions != nullptr;
  if (rope) {
    const int pos = min(max(q.positions[t], 0), q.rope_table_rows - 1);
    const float2* tab = q.rope_table + static_cast<int64_t>(pos) * kHalf + (lane & 15) * E;
#pragma unroll
    for (int j = 0; j < E; ++j) cs[j] = tab[j];
  }
  const float s = RowInvRms(p.rms_of + t * p.rms_dim, p.rms_dim, p.rms_eps, scratch);
#pragma unroll
  for (int i = 0; i < kMaxHeadsPerWarp; ++i) {
    const int h = warp + i * kWarps;
    if (h >= heads) break;
    bf16* x = row + h * kDim + lane * E;
    if (p.bias != nullptr) {
      float b[E];
      LoadBf16<E>(p.bias + h * kDim + lane * E, b);
#pragma unroll
      for (int j = 0; j < E; ++j) v[i][j] = s * v[i][j] + b[j];
    } else {
#pragma unroll
      for (int j = 0; j < E; ++j) v[i][j] *= s;
    }
    if (h >= qk_heads) {  // a v head: scaled only
      StoreBf16<E>(x, v[i]);
      continue;
    }
    NormRopeStoreHead<E>(v[i], norm, h < q.num_q_heads, gq, gk, q.eps, rope, cs, lane, x);
  }
}

// blockDim.x: a multiple of 32, up to 1024 (LaunchRmsScaledSiluMul sizes it to the row).
template <int kVec>
__global__ void __launch_bounds__(1024) RmsScaledSiluMulKernel(RmsScaledSiluMulParams p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const int inter = p.mul.inter;
  const bf16* gate = p.mul.gate_up + t * 2 * inter;
  bf16* out = p.mul.out + t * inter;
  float g[kSiluChunks][kVec], u[kSiluChunks][kVec];
#pragma unroll
  for (int k = 0; k < kSiluChunks; ++k) {
    const int c = (threadIdx.x + k * blockDim.x) * kVec;
    if (c < inter) {
      LoadBf16<kVec>(gate + c, g[k]);
      LoadBf16<kVec>(gate + inter + c, u[k]);
    }
  }
  const float s = RowInvRms(p.rms_of + t * p.rms_dim, p.rms_dim, p.rms_eps, scratch);
#pragma unroll
  for (int k = 0; k < kSiluChunks; ++k) {
    const int c = (threadIdx.x + k * blockDim.x) * kVec;
    if (c >= inter) break;
    float o[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] = SiluF(s * g[k][j]) * (s * u[k][j]);
    StoreBf16<kVec>(out + c, o);
  }
  for (int c = (threadIdx.x + kSiluChunks * blockDim.x) * kVec; c < inter;
       c += blockDim.x * kVec) {  // rows longer than kSiluChunks * blockDim.x chunks
    float gg[kVec], uu[kVec], o[kVec];
    LoadBf16<kVec>(gate + c, gg);
    LoadBf16<kVec>(gate + inter + c, uu);
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] = SiluF(s * gg[j]) * (s * uu[j]);
    StoreBf16<kVec>(out + c, o);
  }
}

__global__ void ScaleColumnsKernel(ScaleColumnsParams p) {
  const int64_t pairs = p.rows * (p.cols / 2);
  const int half_cols = p.cols / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % half_cols) * 2;
    __nv_bfloat162* w = reinterpret_cast<__nv_bfloat162*>(p.w) + i;
    const float2 v = __bfloat1622float2(*w);
    const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p.scale + c));
    *w = __floats2bfloat162_rn(v.x * g.x, v.y * g.y);
  }
}

Status CheckRms(const char* op, const bf16* r, int dim, int rows) {
  if (r == nullptr) return BadArg(op, "null rms_of");
  if (dim <= 0 || dim % 8 != 0) return BadArg(op, "rms_dim must be a positive multiple of 8");
  if (!IsAligned(r, 16)) return BadArg(op, "rms_of must be 16-byte aligned");
  if (rows < 0 || rows > 0x7fffffff) return BadArg(op, "bad rows");
  return Status::Ok();
}

}  // namespace

Status LaunchScaleColumns(const ScaleColumnsParams& p, cudaStream_t stream) {
  const char* op = "ScaleColumns";
  if (!p.w || !p.scale) return BadArg(op, "null pointer");
  if (p.rows < 0 || p.cols <= 0 || p.cols % 2 != 0) return BadArg(op, "cols must be even");
  if (!IsAligned(p.w, 4) || !IsAligned(p.scale, 4)) return BadArg(op, "pointers 4-byte aligned");
  const int64_t pairs = p.rows * (p.cols / 2);
  if (pairs == 0) return Status::Ok();
  const int64_t blocks = std::min<int64_t>((pairs + 255) / 256, 4096);
  ScaleColumnsKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

Status LaunchRmsScaledQkv(const RmsScaledQkvParams& p, cudaStream_t stream) {
  const char* op = "RmsScaledQkv";
  const QkNormRopeParams& q = p.qk;
  PETAL_RETURN_IF_ERROR(CheckRms(op, p.rms_of, p.rms_dim, q.rows));
  if (!q.qkv) return BadArg(op, "null qkv");
  if ((q.q_norm_weight == nullptr) != (q.k_norm_weight == nullptr))
    return BadArg(op, "give both q and k norm weights or neither");
  const int e = q.head_dim / 32;
  if (q.head_dim % 32 != 0 || (e != 2 && e != 4 && e != 8))
    return BadArg(op, "head_dim must be 64, 128 or 256");
  if (q.num_q_heads < 0 || q.num_kv_heads < 0 ||
      q.num_q_heads + 2 * q.num_kv_heads > kWarps * kMaxHeadsPerWarp)
    return BadArg(op, "bad head counts (q + k + v heads <= 64)");
  if (q.row_stride < (q.num_q_heads + 2 * q.num_kv_heads) * q.head_dim || q.row_stride % e != 0)
    return BadArg(op, "row_stride must cover the q, k and v heads");
  if (q.positions && (!q.rope_table || q.rope_table_rows <= 0 || !IsAligned(q.rope_table, 8)))
    return BadArg(op, "rotary needs a rope_table (RopeTable) with rope_table_rows > 0");
  const size_t bytes = 2 * static_cast<size_t>(e);
  for (const void* ptr :
       {static_cast<const void*>(q.qkv), static_cast<const void*>(p.bias),
        static_cast<const void*>(q.q_norm_weight), static_cast<const void*>(q.k_norm_weight)}) {
    if (ptr && !IsAligned(ptr, bytes)) return BadArg(op, "pointers must fit head-vector accesses");
  }
  if (q.rows == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(q.rows)), block(kBlock);
  if (e == 2) (void)LaunchPdl(RmsScaledQkvKernel<2>, grid, block, 0, stream, p);
  if (e == 4) (void)LaunchPdl(RmsScaledQkvKernel<4>, grid, block, 0, stream, p);
  if (e == 8) (void)LaunchPdl(RmsScaledQkvKernel<8>, grid, block, 0, stream, p);
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

Status LaunchRmsScaledSiluMul(const RmsScaledSiluMulParams& p, cudaStream_t stream) {
  const char* op = "RmsScaledSiluMul";
  PETAL_RETURN_IF_ERROR(CheckRms(op, p.rms_of, p.rms_dim, p.mul.rows));
  if (!p.mul.gate_up || !p.mul.out) return BadArg(op, "null pointer");
  if (p.mul.inter <= 0) return BadArg(op, "bad sizes");
  const int vec = ChooseVec({p.mul.inter}, {p.mul.gate_up, p.mul.out});
  if (vec == 0) return BadArg(op, "inter must be even and pointers 4-byte aligned");
  if (p.mul.rows == 0) return Status::Ok();
  const int chunks = p.mul.inter / vec;  // one chunk per thread, up to 1024 threads
  const dim3 grid(static_cast<unsigned>(p.mul.rows)), block(RowThreads(chunks * vec, vec));
  if (vec == 8) {
    (void)LaunchPdl(RmsScaledSiluMulKernel<8>, grid, block, 0, stream, p);
  } else {
    (void)LaunchPdl(RmsScaledSiluMulKernel<2>, grid, block, 0, stream, p);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace petal::cuda
