// Small dense layers on pooled fp32 rows (the score heads of ranking models): one warp per output
// element, fp32 accumulation over bf16 weights, lanes striding the input features and meeting in
// a fixed-order warp reduction (deterministic). Sized by rows x out (both plan-time values), so
// graph-safe; reads only device memory.
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/score_ops.h"

namespace petal::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void DenseRowsKernel(DenseRowsParams p) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(p.rows) * p.out) return;
  const int r = static_cast<int>(warp / p.out), o = static_cast<int>(warp % p.out);
  const float* x = p.x + static_cast<int64_t>(r) * p.x_stride;
  const bf16* w = p.w + static_cast<int64_t>(o) * p.in;
  float acc = 0.f;
  for (int k = lane; k < p.in; k += 32) acc += x[k] * __bfloat162float(w[k]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane != 0) return;
  if (p.bias != nullptr) acc += __bfloat162float(p.bias[o]);
  if (p.tanh) acc = tanhf(acc);
  p.y[static_cast<int64_t>(r) * p.out + o] = acc;
}

}  // namespace

Status LaunchDenseRows(const DenseRowsParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.out <= 0 || p.in <= 0 || p.x == nullptr || p.w == nullptr || p.y == nullptr ||
      p.x_stride < p.in) {
    return InvalidArgument("LaunchDenseRows: bad sizes or null pointers");
  }
  if (p.rows == 0) return Status::Ok();
  const int64_t warps = static_cast<int64_t>(p.rows) * p.out;
  const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  DenseRowsKernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(p);
  PETAL_CUDA_CHECK_LAUNCH("LaunchDenseRows");
  return Status::Ok();
}

}  // namespace petal::cuda
