// The CUTLASS Hopper GEMM with a 128-token tile (gemm_cutlass_kernel.cuh), compiled for sm_90a.
#include "kernels/cuda/gemm_cutlass_kernel.cuh"

namespace petal::cuda::cutlass_gemm {

bool SupportedT128(const Call& call, size_t* workspace) {
  return Kernel<128>::Supported(call, workspace);
}
const char* LaunchT128(const Call& call) { return Kernel<128>::Launch(call); }

}  // namespace petal::cuda::cutlass_gemm
