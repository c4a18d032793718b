// Sequence pooling (mean / CLS / last token) + optional L2 normalisation + Matryoshka truncation.
// One block per sequence; lengths come from cu_seqlens in device memory, so the launch depends
// only on num_seqs and the dims. Threads are split into `groups` that stride over the tokens and
// `lanes` that cover the features; partial sums meet in shared memory in a fixed order, so the
// result is deterministic (no atomics).
#include <algorithm>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kMaxGroups = 16;
constexpr size_t kMaxSmemBytes = 48 * 1024;

template <int kVec>
__global__ void PoolKernel(PoolParams p, int lanes, int groups) {
  PdlWait();                       // see pdl.cuh: before any global memory access
  extern __shared__ float part[];  // [groups][out_dims]
  __shared__ float scratch[32];
  const int s = blockIdx.x;
  const int begin = p.cu_seqlens[s], end = p.cu_seqlens[s + 1];
  const int len = end > begin ? end - begin : 0;
  int t0 = begin, t1 = begin + len;
  if (p.mode == cpu::Pooling::kCls) t1 = begin + (len > 0 ? 1 : 0);
  if (p.mode == cpu::Pooling::kLastToken) t0 = len > 0 ? t1 - 1 : t1;
  const int out_dims = p.out_dims;
  const int group = threadIdx.x / lanes, lane = threadIdx.x - group * lanes;
  for (int f = lane * kVec; f < out_dims; f += lanes * kVec) {
    float acc[kVec] = {};
    for (int t = t0 + group; t < t1; t += groups) {
      float v[kVec];
      LoadBf16<kVec>(p.hidden + static_cast<int64_t>(t) * p.dim + f, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc[j] += v[j];
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) part[group * out_dims + f + j] = acc[j];
  }
  __syncthreads();
  const float scale = (p.mode == cpu::Pooling::kMean && len > 0) ? 1.f / len : 1.f;
  float ss = 0.f;
  // Thread i owns feature column i from here on: it reads part[g][i] for every g and writes only
  // part[0][i], so no other thread's reads are disturbed.
  for (int i = threadIdx.x; i < out_dims; i += blockDim.x) {
    float v = 0.f;
    for (int g = 0; g < groups; ++g) v += part[g * out_dims + i];
    v *= scale;
    part[i] = v;
    ss += v * v;
  }
  float inv = 1.f;
  if (p.normalize) inv = 1.f / fmaxf(sqrtf(BlockSum(ss, scratch)), 1e-12f);
  float* o = p.out + static_cast<int64_t>(s) * out_dims;
  for (int i = threadIdx.x; i < out_dims; i += blockDim.x) o[i] = part[i] * inv;
}

}  // namespace

Status LaunchPool(const PoolParams& p_in, cudaStream_t stream) {
  const char* op = "Pool";
  PoolParams p = p_in;
  if (p.out_dims == 0) p.out_dims = p.dim;
  if (!p.hidden || !p.cu_seqlens || !p.out) return BadArg(op, "null pointer");
  if (p.num_seqs < 0 || p.dim <= 0 || p.out_dims <= 0 || p.out_dims > p.dim)
    return BadArg(op, "bad sizes (need 0 < out_dims <= dim)");
  if (p.num_seqs == 0) return Status::Ok();
  const int vec = ChooseVec({p.dim, p.out_dims}, {p.hidden});
  if (vec == 0) return BadArg(op, "dims must be even and hidden 4-byte aligned");
  const int vecs = p.out_dims / vec;
  const int lanes = std::min(1024, (vecs + 31) / 32 * 32);
  int groups = p.mode == cpu::Pooling::kMean ? std::clamp(1024 / lanes, 1, kMaxGroups) : 1;
  while (groups > 1 && groups * p.out_dims * sizeof(float) > kMaxSmemBytes) --groups;
  const size_t smem = static_cast<size_t>(groups) * p.out_dims * sizeof(float);
  if (smem > kMaxSmemBytes) return BadArg(op, "out_dims too large (max 12288)");
  const int threads = lanes * groups;
  if (vec == 8) {
    (void)LaunchPdl(PoolKernel<8>, p.num_seqs, threads, smem, stream, p, lanes, groups);
  } else {
    (void)LaunchPdl(PoolKernel<2>, p.num_seqs, threads, smem, stream, p, lanes, groups);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace petal::cuda
