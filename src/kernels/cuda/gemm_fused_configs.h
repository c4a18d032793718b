// Internal to gemm_fused*.cu / gemm_fused.cc: the plain (CUTLASS-free) call each fused-GEMM
// instantiation exposes, so that gemm_fused.cc dispatches without including CUTLASS.
// Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace petal::cuda::gemm_fused {

struct Call {
  const void* x = nullptr;  // bf16 [m, k]
  const void* w = nullptr;  // bf16 [n, k]
  void* out = nullptr;      // bf16: SwiGLU [m, n / 2]; QKV and bias + GELU [m, n]
  int m = 0, n = 0, k = 0;
  const void* bias = nullptr;  // QKV and bias + GELU: bf16 [n] or null
  // QKV only (gemm_fused.h, GemmQkvRopeParams).
  const void* q_norm = nullptr;  // bf16 [128] or null (then k_norm too: no norm)
  const void* k_norm = nullptr;
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [m]; null: no rotary
  const float2* rope_table = nullptr;  // [rope_rows, 64] (cos, sin)
  int rope_rows = 0;
  int num_q_heads = 0, num_kv_heads = 0;
  int device = 0, sm_count = 0;
  cudaStream_t stream = nullptr;
  // Launch with the PDL attribute (PETAL_PDL=1; the kernels are built with GDC,
  // kernels_cuda.cmake).
  bool pdl = false;
  // The persistent scheduler's tile order (gemm_fused.cc, SetOrder): CUTLASS's max_swizzle_size
  // (1, 2, 4, 8) and raster order (0 CUTLASS's heuristic, 1 along M, 2 along N).
  int max_swizzle = 1;
  int raster = 0;
  // Probe only (PETAL_FUSED_PROBE=nostore): the SwiGLU epilogue stores nothing, which times the
  // main loop alone. The output is left unwritten.
  bool probe_no_store = false;
};

// Per instantiation: Launch returns null on success, else what failed; Workspace the bytes a
// call needs (the kernels run without one; checked); Prepare sets the kernel's shared-memory
// attribute (once; outside graph capture) and returns false if that failed.
#define PETAL_FUSED_GEMM_DECL(name)        \
  const char* Launch##name(const Call& c); \
  size_t Workspace##name(const Call& c);   \
  bool Prepare##name();
// Names: op, cooperative (C, 128-token tiles) or pingpong (P, 64), feature tile width, cluster.
// The set is what won somewhere on the H200 (docs/kernels.md, "Fused GEMMs"); each costs ~40 s of
// one core to compile.
PETAL_FUSED_GEMM_DECL(SwigluC256x1)
PETAL_FUSED_GEMM_DECL(SwigluC256x2)
PETAL_FUSED_GEMM_DECL(SwigluP256x1)
PETAL_FUSED_GEMM_DECL(SwigluP128x1)
PETAL_FUSED_GEMM_DECL(QkvRopeC256x1)  // q/k norm + rotary: whole 128-wide heads per tile
PETAL_FUSED_GEMM_DECL(QkvRopeC256x2)
PETAL_FUSED_GEMM_DECL(QkvRopeP128x1)
PETAL_FUSED_GEMM_DECL(BiasGeluC256x1)  // BERT FFN input: bias + erf GELU
PETAL_FUSED_GEMM_DECL(BiasGeluP128x1)
#undef PETAL_FUSED_GEMM_DECL

}  // namespace petal::cuda::gemm_fused
