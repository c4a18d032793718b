// Internal to gemm.cc / gemm_tune.cc: the cached cuBLASLt plan of one GEMM problem, and helpers
// to read an algorithm's configuration. Thread-safety: plain data, owned by one Gemm.
#pragma once

#include <cublasLt.h>

#include "kernels/cuda/gemm.h"

namespace petal::cuda {

struct Gemm::Plan {
  enum class State { kUntuned, kTuned, kTooLarge, kFailed };
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_w = nullptr, layout_a = nullptr, layout_out = nullptr;
  cublasLtMatmulAlgo_t algo{};   // what Run enqueues
  cublasLtMatmulAlgo_t first{};  // the heuristic's first choice (the fallback)
  // One of our kernels instead of cuBLASLt (gemm_smallm.h, gemm_cluster.h), with its K splits and
  // (cluster kernel) tile configuration.
  PetalKernel petal_kernel = PetalKernel::kNone;
  int petal_splits = 0;
  int petal_config = 0;
  State state = State::kUntuned;
  int candidates = 0;
  bool chained = false;
  float first_us = 0.f, chosen_us = 0.f, ours_us = 0.f;
  std::string ours;  // see GemmPlanInfo::ours
  ~Plan() {
    if (layout_out) cublasLtMatrixLayoutDestroy(layout_out);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (layout_w) cublasLtMatrixLayoutDestroy(layout_w);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// Reads one integer configuration attribute of an algorithm (0 if the query fails); the
// attributes have different widths (uint16/uint32/int32), hence the template.
template <typename T>
int AlgoConfig(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return 0;
  return static_cast<int>(v);
}

inline int AlgoId(const cublasLtMatmulAlgo_t& a) {
  return AlgoConfig<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
}
inline int AlgoSplitK(const cublasLtMatmulAlgo_t& a) {
  return AlgoConfig<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
}
inline int AlgoReduction(const cublasLtMatmulAlgo_t& a) {
  return AlgoConfig<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
}

}  // namespace petal::cuda
