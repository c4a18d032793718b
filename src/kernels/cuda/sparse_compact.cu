// SPLADE rows to their non-zero entries on the GPU (score_ops.h, LaunchSparseCompact): one block
// per pooled row. With a top-k for the row, a radix select over the positive values' bit patterns
// (positive floats order as their bits do) finds the k-th largest value T in four passes of 8
// bits (a 256-bin shared histogram each), and how many entries equal to T to keep. Then one
// ordered pass over the row in tiles of kThreads entries: a block-wide exclusive sum of two packed
// flags (strictly above T in the low 16 bits, equal to T in the high 16) gives each kept entry
// its place, so entries land in ascending index order with no sort and no atomics: deterministic.
// Thread-safety: the launcher is stateless.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/score_ops.h"

namespace petal::cuda {
namespace {

constexpr int kThreads = 512;  // one entry per thread per tile: the packed counts fit 16 bits

// The bits T of the k-th largest positive value of `row`, and how many entries equal to T are
// kept (the first in index order) so that k are kept in all; T = 0, *take = 0 when the row has at
// most k positive values (then every positive value is kept). Called by the whole block.
__device__ void SelectTopK(const float* row, int vocab, int k, unsigned* t_out, int* take_out) {
  __shared__ int hist[256];
  __shared__ unsigned prefix_s;
  __shared__ int remaining_s, total_s;
  unsigned prefix = 0, mask = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float x = row[v];
      if (!(x > 0.f)) continue;
      const unsigned b = __float_as_uint(x);
      if ((b & mask) == prefix) atomicAdd(&hist[(b >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (shift == 24) {
        int total = 0;
        for (int d = 0; d < 256; ++d) total += hist[d];
        total_s = total;
      }
      int cum = 0, d = 255;
      for (; d > 0; --d) {
        if (cum + hist[d] >= remaining) break;
        cum += hist[d];
      }
      prefix_s = prefix | (static_cast<unsigned>(d) << shift);
      remaining_s = remaining - cum;
    }
    __syncthreads();
    if (total_s <= k) {  // uniform across the block
      *t_out = 0;
      *take_out = 0;
      return;
    }
    prefix = prefix_s;
    remaining = remaining_s;
    mask |= 255u << shift;
  }
  *t_out = prefix;
  *take_out = remaining;
}

__global__ void __launch_bounds__(kThreads) SparseCompactKernel(SparseCompactParams p) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  const int r = blockIdx.x;
  const float* row = p.dense + static_cast<int64_t>(r) * p.ld;
  const int k = p.top_k != nullptr ? p.top_k[r] : 0;
  unsigned t = 0;  // kept: value > 0 with bits > t, or bits == t among the first `take`
  int take = 0;
  if (k > 0) SelectTopK(row, p.vocab, k, &t, &take);
  int32_t* idx = p.indices + static_cast<int64_t>(r) * p.stride;
  float* val = p.values + static_cast<int64_t>(r) * p.stride;
  int strict_base = 0, tie_base = 0;
  for (int v0 = 0; v0 < p.vocab; v0 += kThreads) {
    const int v = v0 + static_cast<int>(threadIdx.x);
    const float x = v < p.vocab ? row[v] : 0.f;
    const unsigned b = __float_as_uint(x);
    const bool positive = x > 0.f;
    const int strict = positive && b > t;
    const int tie = positive && b == t && take > 0;
    int prefix = 0, total = 0;
    Scan(scan).ExclusiveSum(strict | (tie << 16), prefix, total);
    const int ties_before = tie_base + (prefix >> 16);
    if (strict || (tie && ties_before < take)) {
      const int at = strict_base + (prefix & 0xffff) + min(ties_before, take);
      idx[at] = v;
      val[at] = x;
    }
    strict_base += total & 0xffff;
    tie_base += total >> 16;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  if (threadIdx.x == 0) p.counts[r] = strict_base + min(tie_base, take);
}

}  // namespace

Status LaunchSparseCompact(const SparseCompactParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.vocab <= 0 || p.ld < p.vocab || p.stride < p.vocab ||
      (p.rows > 0 && (p.dense == nullptr || p.counts == nullptr || p.indices == nullptr ||
                      p.values == nullptr))) {
    return InvalidArgument("LaunchSparseCompact: bad sizes or null pointers");
  }
  if (p.rows == 0) return Status::Ok();
  SparseCompactKernel<<<p.rows, kThreads, 0, stream>>>(p);
  PETAL_CUDA_CHECK_LAUNCH("LaunchSparseCompact");
  return Status::Ok();
}

}  // namespace petal::cuda
