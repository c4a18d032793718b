// The interleaved gate/up layout's two small kernels (gemm_fused.h): the one-off weight
// interleave at load and SwiGLU over an interleaved product (the batches the fused GEMM does not
// take). Grid-stride loops; grids depend only on sizes, so both are graph-safe.
#include <algorithm>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_fused.h"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 8 * 2;

int GridFor(int64_t work_items) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((work_items + kThreads - 1) / kThreads, kMaxBlocks)));
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

__device__ __forceinline__ float Silu(float g) { return g / (1.f + expf(-g)); }

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
