// Internal to Gemm: CUTLASS 3 Hopper GEMMs (TMA loads, wgmma, warp-specialised cooperative
// kernels, a persistent stream-K / split-K tile scheduler) as one more family of candidates for
// the tuner, used only where they measure faster than cuBLASLt and their output agrees with
// cuBLASLt's (gemm_tune.cc). Built only when the CUTLASS headers are present (scripts/setup.sh
// step 2c) and the build targets sm_90a; otherwise CutlassGemmAvailable() is false.
//
// Small M is the case they are for: the product is computed transposed (out^T = w a^T), so the
// weights' output features fill the 128-wide wgmma side and the few tokens the narrow side, and
// the scheduler spreads the K loop of the few output tiles over all SMs (stream-K) or splits it
// (split-K); partial sums are reduced in fp32 in a fixed order (deterministic). Computes Gemm's
// function out = a w^T + c for bf16 operands without bias or GELU. Thread-safety: stateless
// apart from a once-per-kernel attribute set on first use (done while tuning, not capturing).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "common/status.h"
#include "kernels/cuda/gemm.h"

namespace petal::cuda {

// Largest M (tokens) the candidates are offered for.
constexpr int kCutlassGemmMaxM = 1024;

// `splits`: 0 = stream-K, 1 = data-parallel (one CTA per output tile), > 1 = split-K.
struct CutlassGemmChoice {
  int config = 0;  // tile configuration, < CutlassGemmConfigs()
  int splits = 0;
};

// Whether this binary has the kernels and the current device runs them (compute capability 9.0).
bool CutlassGemmAvailable();
// Number of tile configurations compiled in (0 without CUTLASS).
int CutlassGemmConfigs();
// PETAL_GEMM_CUTLASS=prefer (and the candidates available): the tuner takes the fastest CUTLASS
// candidate wherever one runs, even if cuBLASLt is faster alone. An experiment for PDL chains
// (PETAL_PDL=1), where a CUTLASS GEMM overlaps its neighbours and a cuBLASLt one cannot.
bool CutlassGemmPreferred();
// Whether configuration c is built to take PDL launches (the pingpong tiles; see
// kernels_cuda.cmake). Only those are launched with the attribute, and `prefer` picks among them.
bool CutlassGemmChainable(CutlassGemmChoice c);
std::string CutlassGemmName(CutlassGemmChoice c);  // e.g. "cutlass128x64/sk" or ".../s4"

// Whether `c` handles p within `workspace_bytes` of workspace: bf16, no bias, no GELU, n and k
// multiples of 8, 16-byte aligned operands, m <= kCutlassGemmMaxM, and CUTLASS's can_implement.
bool CutlassGemmSupported(const GemmParams& p, CutlassGemmChoice c, size_t workspace_bytes);

// Enqueues out = a w^T + c on `stream`; requires CutlassGemmSupported. Graph-capturable once the
// same configuration has run outside capture (the tuner does that).
Status LaunchCutlassGemm(const GemmParams& p, CutlassGemmChoice c, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream);

}  // namespace petal::cuda
