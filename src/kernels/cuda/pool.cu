// Sequence pooling (mean / CLS / last token) + optional L2 normalisation + Matryoshka truncation,
// and the same over pooling spans (LaunchPoolSpans). One block per sequence (span); lengths come
// from cu_seqlens (the spans) in device memory, so the launch depends only on the count and dims. Threads are split into `groups` that stride over the tokens and
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

// kSpans: block s pools span s of `spans` (start, end, flags) instead of sequence s.
template <int kVec, bool kSpans>
__global__ void PoolKernel(PoolParams p, const int32_t* spans, int lanes, int groups) {
  PdlWait();                       // see pdl.cuh: before any global memory access
  extern __shared__ float part[];  // [groups][out_dims]
  __shared__ float scratch[32];
  const int s = blockIdx.x;
  int begin, end;
  cpu::Pooling mode = p.mode;
  bool normalize = p.normalize;
  if constexpr (kSpans) {
    begin = spans[3 * s];
    end = spans[3 * s + 1];
    const int flags = spans[3 * s + 2];
    mode = static_cast<cpu::Pooling>(flags & 0xff);
    normalize = (flags & 0x100) != 0;
  } else {
    begin = p.cu_seqlens[s];
    end = p.cu_seqlens[s + 1];
  }
  const int len = end > begin ? end - begin : 0;
  int t0 = begin, t1 = begin + len;
  if (mode == cpu::Pooling::kCls) t1 = begin + (len > 0 ? 1 : 0);
  if (mode == cpu::Pooling::kLastToken) t0 = len > 0 ? t1 - 1 : t1;
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
  const float scale = (mode == cpu::Pooling::kMean && len > 0) ? 1.f / len : 1.f;
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
  if (normalize) inv = 1.f / fmaxf(sqrtf(BlockSum(ss, scratch)), 1e-12f);
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
  const int32_t* no_spans = nullptr;
  if (vec == 8) {
    (void)LaunchPdl(PoolKernel<8, false>, p.num_seqs, threads, smem, stream, p, no_spans, lanes,
                    groups);
  } else {
    (void)LaunchPdl(PoolKernel<2, false>, p.num_seqs, threads, smem, stream, p, no_spans, lanes,
                    groups);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

Status LaunchPoolSpans(const PoolSpansParams& q, cudaStream_t stream) {
  const char* op = "PoolSpans";
  PoolParams p;
  p.hidden = q.hidden;
  p.cu_seqlens = q.spans;  // unused by the span kernel; non-null for the checks below
  p.num_seqs = q.num_spans;
  p.dim = q.dim;
  p.out_dims = q.out_dims == 0 ? q.dim : q.out_dims;
  p.out = q.out;
  if (!p.hidden || !q.spans || !p.out) return BadArg(op, "null pointer");
  if (p.num_seqs < 0 || p.dim <= 0 || p.out_dims <= 0 || p.out_dims > p.dim)
    return BadArg(op, "bad sizes (need 0 < out_dims <= dim)");
  if (p.num_seqs == 0) return Status::Ok();
  const int vec = ChooseVec({p.dim, p.out_dims}, {p.hidden});
  if (vec == 0) return BadArg(op, "dims must be even and hidden 4-byte aligned");
  // The pooling mode is per span (device memory): size the groups for the mean, which the
  // first / last token modes also run correctly with (one group finds their token).
  const int lanes = std::min(1024, (p.out_dims / vec + 31) / 32 * 32);
  int groups = std::clamp(1024 / lanes, 1, kMaxGroups);
  while (groups > 1 && groups * p.out_dims * sizeof(float) > kMaxSmemBytes) --groups;
  const size_t smem = static_cast<size_t>(groups) * p.out_dims * sizeof(float);
  if (smem > kMaxSmemBytes) return BadArg(op, "out_dims too large (max 12288)");
  const int threads = lanes * groups;
  if (vec == 8) {
    (void)LaunchPdl(PoolKernel<8, true>, p.num_seqs, threads, smem, stream, p, q.spans, lanes,
                    groups);
  } else {
    (void)LaunchPdl(PoolKernel<2, true>, p.num_seqs, threads, smem, stream, p, q.spans, lanes,
                    groups);
  }
  PETAL_CUDA_CHECK_LAUNCH(op);
  return Status::Ok();
}

}  // namespace petal::cuda
