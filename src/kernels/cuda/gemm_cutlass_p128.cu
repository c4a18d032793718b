// The CUTLASS Hopper GEMM with 64-feature pingpong tiles and a 128-token tile
// (gemm_cutlass_kernel.cuh), compiled for sm_90a.
#include "kernels/cuda/gemm_cutlass_kernel.cuh"

namespace petal::cuda::cutlass_gemm {

bool SupportedP128(const Call& call, size_t* workspace) {
  return Kernel<128, Pingpong>::Supported(call, workspace);
}
const char* LaunchP128(const Call& call) { return Kernel<128, Pingpong>::Launch(call); }

}  // namespace petal::cuda::cutlass_gemm
