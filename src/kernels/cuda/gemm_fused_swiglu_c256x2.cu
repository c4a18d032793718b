// A fused GEMM instantiation (gemm_fused_kernel.cuh, gemm_fused_configs.h), for sm_90a.
#include "kernels/cuda/gemm_fused_epilogues.cuh"

PETAL_FUSED_GEMM_DEFINE(SwigluC256x2, Kernel<256, Cooperative, 2, SwigluEpilogue>)
