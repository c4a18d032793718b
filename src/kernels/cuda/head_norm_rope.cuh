// Device helper shared by the q/k norm + rotary kernels (qk_norm_rope.cu, and the folded-norm QKV
// kernel in rms_fold.cu): one q or k head held across a warp, E consecutive values a lane (lane l
// holds elements l E .. l E + E - 1 of a head_dim = 32 E head). Lanes 0-15 hold the first half
// (a), lanes 16-31 the second (b) at the same offsets, so the rotate-half partner of lane l's
// values is in lane l ^ 16 and both use the same (cos, sin) pairs.
// Thread-safety: called by all 32 lanes of a warp together (it shuffles and reduces).
#pragma once

#include "kernels/cuda/device_utils.cuh"

namespace petal::cuda {

// With `norm`, RMSNorm of the head with the q weight gq (is_q) or the k weight gk; then, with
// `rope`, the rotary by this lane's pairs cs; stores the head as bf16 at x (this lane's E values).
// The weights are picked element by element, not through a pointer to one of the arrays: that
// would put both in local memory.
template <int E>
__device__ __forceinline__ void NormRopeStoreHead(float (&v)[E], bool norm, bool is_q,
                                                  const float (&gq)[E], const float (&gk)[E],
                                                  float eps, bool rope, const float2 (&cs)[E],
                                                  int lane, bf16* x) {
  if (norm) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < E; ++j) ss += v[j] * v[j];
    const float inv = rsqrtf(WarpSum(ss) / (32 * E) + eps);
#pragma unroll
    for (int j = 0; j < E; ++j) v[j] *= inv * (is_q ? gq[j] : gk[j]);
  }
  if (!rope) {
    StoreBf16<E>(x, v);
    return;
  }
  const bool first = lane < 16;
  float o[E];
#pragma unroll
  for (int j = 0; j < E; ++j) {
    const float other = __shfl_xor_sync(0xffffffffu, v[j], 16);
    const float a = first ? v[j] : other, b = first ? other : v[j];
    o[j] = first ? a * cs[j].x - b * cs[j].y : b * cs[j].x + a * cs[j].y;
  }
  StoreBf16<E>(x, o);
}

}  // namespace petal::cuda
