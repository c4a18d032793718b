// Per-row L2 normalisation from bf16 to fp32: a multi-vector (ColBERT) model's token vectors
// after its projection (ops.h LaunchNormalizeRows; CPU reference cpu::L2NormalizeRows). One warp
// per row; the grid depends only on the row count passed (a capacity for graph capture).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops.h"

namespace petal::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void NormalizeRowsKernel(const bf16* __restrict__ x, float* __restrict__ out, int rows,
                                    int dim) {
  const int row = blockIdx.x * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const bf16* xr = x + static_cast<int64_t>(row) * dim;
  float ss = 0.0f;
  for (int j = lane; j < dim; j += 32) {
    const float v = __bfloat162float(xr[j]);
    ss += v * v;
  }
  for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float inv = 1.0f / fmaxf(sqrtf(ss), 1e-12f);
  float* o = out + static_cast<int64_t>(row) * dim;
  for (int j = lane; j < dim; j += 32) o[j] = __bfloat162float(xr[j]) * inv;
}

}  // namespace

Status LaunchNormalizeRows(const NormalizeRowsParams& p, cudaStream_t stream) {
  if (p.rows < 0 || p.dim <= 0) return InvalidArgument("NormalizeRows: bad shape");
  if (p.rows == 0) return Status::Ok();
  if (!p.x || !p.out) return InvalidArgument("NormalizeRows: null pointer");
  const int blocks = (p.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  NormalizeRowsKernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(p.x, p.out, p.rows, p.dim);
  PETAL_CUDA_CHECK_LAUNCH("NormalizeRows");
  return Status::Ok();
}

}  // namespace petal::cuda
