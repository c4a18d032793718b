// Qwen3 per-head q/k RMSNorm + rotary embedding, in place on the fused QKV activations. Two
// kernels:
//  - QkNormRopeVecKernel<E, H> (head_dim = 32 E with E = 2, 4 or 8, rotary from the precomputed
//    table or none; the engine's case): one warp per (token, H heads); each lane holds E
//    consecutive values of a head in registers, loaded and stored with one vector access; the
//    rotate-half partner of lane l's values sits in lane l ^ 16 (half = 16 E), one shuffle away.
//    No shared memory.
//  - QkNormRopeKernel (any even head_dim <= 512, and the fp64-angle path without a table): one
//    warp per (token, head); the head is staged in fp32 shared memory so the partner is at hand
//    without shuffles.
// Both compute the same fp32 expressions in the same order.
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/head_norm_rope.cuh"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 512;
constexpr double kTwoPi = 6.283185307179586476925286766559;

struct RopeArgs {
  QkNormRopeParams p;
  double log2_theta;
};

__global__ void __launch_bounds__(kWarpsPerBlock * 32) QkNormRopeKernel(RopeArgs args) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float smem[];
  const QkNormRopeParams& p = args.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int heads = p.num_q_heads + p.num_kv_heads;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (item >= static_cast<int64_t>(p.rows) * heads) return;  // whole warp exits; no block barrier
  const int64_t t = item / heads;
  const int h = static_cast<int>(item - t * heads);
  const int d = p.head_dim;
  // q heads sit at h*d; k heads follow all q heads, so k head (h - Hq) is at Hq*d + (h-Hq)*d,
  // which is again h*d.
  bf16* x = p.qkv + t * p.row_stride + static_cast<int64_t>(h) * d;
  const bf16* w = h < p.num_q_heads ? p.q_norm_weight : p.k_norm_weight;
  float* s = smem + warp * d;

  float ss = 0.f;
  for (int i = lane * 2; i < d; i += 64) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + i));
    *reinterpret_cast<float2*>(s + i) = f;  // 8-byte stores: conflict-free across the warp
    ss += f.x * f.x + f.y * f.y;
  }
  if (w != nullptr) {
    const float inv = rsqrtf(WarpSum(ss) / d + p.eps);
    for (int i = lane * 2; i < d; i += 64) {
      const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(w + i));
      s[i] *= inv * g.x;
      s[i + 1] *= inv * g.y;
    }
  }
  __syncwarp();
  if (p.positions == nullptr) {
    for (int i = lane * 2; i < d; i += 64)
      *reinterpret_cast<__nv_bfloat162*>(x + i) = __floats2bfloat162_rn(s[i], s[i + 1]);
    return;
  }
  const int half = d / 2;
  if (p.rope_table != nullptr) {
    const int pos = min(max(p.positions[t], 0), p.rope_table_rows - 1);
    const float2* cs = p.rope_table + static_cast<int64_t>(pos) * half;
    for (int j = lane; j < half; j += 32) {
      const float2 c = cs[j];
      const float a = s[j], b = s[j + half];
      x[j] = __float2bfloat16_rn(a * c.x - b * c.y);
      x[j + half] = __float2bfloat16_rn(b * c.x + a * c.y);
    }
    return;
  }
  const double pos = p.positions[t];
  for (int j = lane; j < half; j += 32) {
    // inv_freq = theta^(-2j/d) and the angle in fp64, reduced to [-pi, pi] before the fp32
    // sincos: at position 32K the fp32 angle alone would be off by ~2e-3 rad.
    const double angle = pos * exp2(-2.0 * j / d * args.log2_theta);
    const float r = static_cast<float>(angle - kTwoPi * rint(angle / kTwoPi));
    float sn, c;
    sincosf(r, &sn, &c);
    const float a = s[j], b = s[j + half];
    x[j] = __float2bfloat16_rn(a * c - b * sn);
    x[j + half] = __float2bfloat16_rn(b * c + a * sn);
  }
}

constexpr int kVecWarpsPerBlock = 8;
constexpr int kVecGroupMinRows = 512;  // engine A/B, session 22: 1-2% faster at 512-768 rows

// One warp per (token, group of H consecutive heads). Every global load is issued before any use:
// the group's H heads, and the token's rotary pairs and the norm weights once for all of them. At
// H = 1 a lane has one 4-16 byte load in flight, too few to keep HBM busy on big batches; the
// rotary pairs, read once a group instead of once a head, were also 4x the activation bytes.
template <int E, int H>
__global__ void __launch_bounds__(kVecWarpsPerBlock * 32) QkNormRopeVecKernel(QkNormRopeParams p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  constexpr int kDim = 32 * E, kHalf = kDim / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int heads = p.num_q_heads + p.num_kv_heads;
  const int groups = (heads + H - 1) / H;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kVecWarpsPerBlock + warp;
  if (item >= static_cast<int64_t>(p.rows) * groups) return;  // whole warp exits
  const int64_t t = item / groups;
  const int h0 = static_cast<int>(item - t * groups) * H;
  bf16* x = p.qkv + t * p.row_stride + static_cast<int64_t>(h0) * kDim + lane * E;
  const bool rope = p.positions != nullptr;
  const int pos = rope ? min(max(p.positions[t], 0), p.rope_table_rows - 1) : 0;
  float v[H][E];
#pragma unroll
  for (int i = 0; i < H; ++i)
    if (h0 + i < heads) LoadBf16<E>(x + i * kDim, v[i]);
  // This lane's (cos, sin) pairs: the same for lane l and its partner l ^ 16 (head_norm_rope.cuh).
  float2 cs[E];
  if (rope) {
    const float2* c = p.rope_table + static_cast<int64_t>(pos) * kHalf + (lane & 15) * E;
#pragma unroll
    for (int j = 0; j < E; j += 2) {
      const float4 q = *reinterpret_cast<const float4*>(c + j);  // E even: 16-byte aligned
      cs[j] = make_float2(q.x, q.y);
      cs[j + 1] = make_float2(q.z, q.w);
    }
  }
  const bool norm = p.q_norm_weight != nullptr;
  float gq[E], gk[E];
  if (norm) {
    LoadBf16<E>(p.q_norm_weight + lane * E, gq);
    LoadBf16<E>(p.k_norm_weight + lane * E, gk);
  }
#pragma unroll
  for (int i = 0; i < H; ++i) {
    if (h0 + i >= heads) break;  // uniform across the warp
    NormRopeStoreHead<E>(v[i], norm, h0 + i < p.num_q_heads, gq, gk, p.eps, rope, cs, lane,
                         x + i * kDim);
  }
}

// Whether QkNormRopeVecKernel<E, H> serves p (head_dim 64/128/256, table or no rotary, aligned).
int VecElems(const QkNormRopeParams& p) {
  const int e = p.head_dim / 32;
  if (p.head_dim % 32 != 0 || (e != 2 && e != 4 && e != 8)) return 0;
  if (p.positions != nullptr && p.rope_table == nullptr) return 0;
  // The rotary pairs are read two at a time (16 bytes); the contract only promises 8.
  if (p.positions != nullptr && !IsAligned(p.rope_table, 16)) return 0;
  const size_t bytes = 2 * static_cast<size_t>(e);  // one lane's vector access
  if (!IsAligned(p.qkv, bytes) || p.row_stride % e != 0) return 0;
  if (p.q_norm_weight && (!IsAligned(p.q_norm_weight, bytes) || !IsAligned(p.k_norm_weight, bytes)))
    return 0;
  return e;
}

// Heads per warp for QkNormRopeVecKernel: p.heads_per_warp when set (1 or 4; the launcher checks
// it), else 4 from kVecGroupMinRows rows up and 1 below (small batches need the warps more than
// the overlap).
int VecHeadsPerWarp(const QkNormRopeParams& p) {
  if (p.heads_per_warp != 0) return p.heads_per_warp;
  return p.rows >= kVecGroupMinRows ? 4 : 1;
}

}  // namespace

std::vector<float2> RopeTable(int rows, int head_dim, double theta) {
  const int half = head_dim / 2;
  std::vector<float2> t(static_cast<size_t>(rows) * half);
  for (int j = 0; j < half; ++j) {
    const double inv_freq = std::pow(theta, -2.0 * j / head_dim);
    for (int pos = 0; pos < rows; ++pos) {
      const double a = pos * inv_freq;
      t[static_cast<size_t>(pos) * half + j] =
          make_float2(static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a)));
    }
  }
  return t;
}

Status LaunchQkNormRope(const QkNormRopeParams& p, cudaStream_t stream) {
  const char* op = "QkNormRope";
  if (!p.qkv) return BadArg(op, "null qkv");
  if ((p.q_norm_weight == nullptr) != (p.k_norm_weight == nullptr))
    return BadArg(op, "give both q and k norm weights or neither");
  if (p.rows < 0 || p.num_q_heads < 0 || p.num_kv_heads < 0 || p.head_dim <= 0 ||
      p.head_dim % 2 != 0 || p.head_dim > kMaxHeadDim)
    return BadArg(op, "bad sizes (head_dim must be even and <= 512)");
  if (p.row_stride % 2 != 0 || p.row_stride < (p.num_q_heads + p.num_kv_heads) * p.head_dim)
    return BadArg(op, "row_stride must be even and cover the q and k heads");
  if (!IsAligned(p.qkv, 4) ||
      (p.q_norm_weight && (!IsAligned(p.q_norm_weight, 4) || !IsAligned(p.k_norm_weight, 4))))
    return BadArg(op, "pointers must be 4-byte aligned");
  if (p.positions && !(p.theta > 0)) return BadArg(op, "theta must be positive");
  if (p.heads_per_warp != 0 && p.heads_per_warp != 1 && p.heads_per_warp != 4)
    return BadArg(op, "heads_per_warp must be 0 (by batch size), 1 or 4");
  if (p.rope_table && (p.rope_table_rows <= 0 || !IsAligned(p.rope_table, 8)))
    return BadArg(op, "rope_table needs rope_table_rows > 0 and 8-byte alignment");
  const int64_t items = static_cast<int64_t>(p.rows) * (p.num_q_heads + p.num_kv_heads);
  if (items == 0) return Status::Ok();
  if (const int e = VecElems(p); e != 0) {
    const int h = VecHeadsPerWarp(p);
    const int heads = p.num_q_heads + p.num_kv_heads;
    const int64_t warps = static_cast<int64_t>(p.rows) * ((heads + h - 1) / h);
    const int64_t vblocks = (warps + kVecWarpsPerBlock - 1) / kVecWarpsPerBlock;
    if (vblocks > 0x7fffffff) return BadArg(op, "too many rows");
    const dim3 grid(static_cast<unsigned>(vblocks)), block(kVecWarpsPerBlock * 32);
    auto launch = [&](auto kernel) { (void)LaunchPdl(kernel, grid, block, 0, stream, p); };
    if (h == 1) {
      if (e == 2) launch(QkNormRopeVecKernel<2, 1>);
      if (e == 4) launch(QkNormRopeVecKernel<4, 1>);
      if (e == 8) launch(QkNormRopeVecKernel<8, 1>);
    } else {
      if (e == 2) launch(QkNormRopeVecKernel<2, 4>);
      if (e == 4) launch(QkNormRopeVecKernel<4, 4>);
      if (e == 8) launch(QkNormRopeVecKernel<8, 4>);
    }
    PETAL_CUDA_CHECK_LAUNCH(op);
    return Status::Ok();
  }
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) return BadArg(op, "too many rows");
  RopeArgs args{p, p.positions ? std::log2(p.theta) : 0.0};
  const size_t smem = static_cast<size_t>(kWarpsPerBlock) * p.head_dim * sizeof(float);
  (void)LaunchPdl(QkNormRopeKernel, static_cast<unsigned>(blocks), kWarpsPerBlock * 32, smem,
                  stream, args);
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace petal::cuda
