// The fused GEMM (gemm_fused_kernel.cuh): SwiGLU with 128 x 128 tiles, for sm_90a.
#include "kernels/cuda/gemm_fused_epilogues.cuh"

PETAL_FUSED_GEMM_DEFINE(SwigluN128, Kernel<128, SwigluEpilogue>)
