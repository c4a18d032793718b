// The CUTLASS Hopper GEMM with 64-feature pingpong tiles and a 64-token tile
// (gemm_cutlass_kernel.cuh), compiled for sm_90a.
#include "kernels/cuda/gemm_cutlass_kernel.cuh"

namespace petal::cuda::cutlass_gemm {

bool SupportedP64(const Call& call, size_t* workspace) {
  return Kernel<64, Pingpong>::Supported(call, workspace);
}
const char* LaunchP64(const Call& call) { return Kernel<64, Pingpong>::Launch(call); }

}  // namespace petal::cuda::cutlass_gemm
