// The CUTLASS Hopper GEMM with a 64-token tile (gemm_cutlass_kernel.cuh), compiled for sm_90a.
#include "kernels/cuda/gemm_cutlass_kernel.cuh"

namespace petal::cuda::cutlass_gemm {

bool SupportedT64(const Call& call, size_t* workspace) {
  return Kernel<64>::Supported(call, workspace);
}
const char* LaunchT64(const Call& call) { return Kernel<64>::Launch(call); }

}  // namespace petal::cuda::cutlass_gemm
