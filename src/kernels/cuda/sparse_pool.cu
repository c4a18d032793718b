// SPLADE pooling of MLM logits on the GPU (score_ops.h, LaunchSparseMaxPool): a block owns 64
// tokens of a chunk and 512 vocabulary columns (two per thread, bf16x2 loads, coalesced along the
// vocabulary); each thread walks its tokens in order, keeps the running max of the raw logits per
// sequence, and merges log1p(max) into the fp32 output with an integer atomicMax (the values are
// positive, so their bit patterns order as the floats do; max is order-free: deterministic). The
// slice's first sequence comes from a binary search over cu_seqlens in device memory, so a
// captured graph serves any batch of its bucket. Thread-safety: the launcher is stateless.
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/score_ops.h"

namespace petal::cuda {
namespace {

constexpr int kThreads = 256;  // x 2 columns each
constexpr int kSlice = 64;     // tokens per block

__device__ void MergeMax(float* dst, float max_logit) {
  if (max_logit > 0.f) atomicMax(reinterpret_cast<int*>(dst), __float_as_int(log1pf(max_logit)));
}

__global__ void SparseMaxPoolKernel(SparseMaxPoolParams p) {
  __shared__ int first_seq;
  const int t0 = p.row0 + static_cast<int>(blockIdx.y) * kSlice;
  const int t1 = min(t0 + kSlice, p.row0 + p.rows);
  if (threadIdx.x == 0) {  // the first sequence s with cu_seqlens[s + 1] > t0 (num_seqs: none)
    int lo = 0, hi = p.num_seqs;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (p.cu_seqlens[mid + 1] > t0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    first_seq = lo;
  }
  __syncthreads();
  const int v = 2 * (static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x));
  if (v >= p.vocab) return;
  int t = t0;
  for (int s = first_seq; s < p.num_seqs && t < t1; ++s) {
    const int end = min(p.cu_seqlens[s + 1], t1);
    float m0 = 0.f, m1 = 0.f;  // relu: the max starts at 0 (NaN logits are skipped by fmaxf)
    for (; t < end; ++t) {
      const __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(
          p.logits + static_cast<int64_t>(t - p.row0) * p.ld + v);
      m0 = fmaxf(m0, __low2float(x));
      m1 = fmaxf(m1, __high2float(x));
    }
    float* row = p.out + static_cast<int64_t>(s) * p.vocab;
    MergeMax(row + v, m0);
    if (v + 1 < p.vocab) MergeMax(row + v + 1, m1);
  }
}

}  // namespace

Status LaunchSparseMaxPool(const SparseMaxPoolParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.row0 < 0 || p.vocab <= 0 || p.ld < p.vocab || p.ld % 2 != 0 ||
      p.num_seqs < 0 || p.logits == nullptr || p.cu_seqlens == nullptr || p.out == nullptr ||
      !IsAligned(p.logits, 4)) {
    return InvalidArgument(
        "LaunchSparseMaxPool: bad sizes, null pointers, an odd ld or unaligned logits");
  }
  if (p.rows == 0 || p.num_seqs == 0) return Status::Ok();
  const dim3 grid((p.vocab + 2 * kThreads - 1) / (2 * kThreads), (p.rows + kSlice - 1) / kSlice);
  SparseMaxPoolKernel<<<grid, kThreads, 0, stream>>>(p);
  PETAL_CUDA_CHECK_LAUNCH("LaunchSparseMaxPool");
  return Status::Ok();
}

}  // namespace petal::cuda
