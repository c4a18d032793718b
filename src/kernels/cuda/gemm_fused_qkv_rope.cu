// The fused GEMM (gemm_fused_kernel.cuh): the QKV projection with q/k norm and rotary, 128 x 128 tiles, for sm_90a.
#include "kernels/cuda/gemm_fused_epilogues.cuh"

PETAL_FUSED_GEMM_DEFINE(QkvRope, Kernel<128, QkvRopeEpilogue>)
