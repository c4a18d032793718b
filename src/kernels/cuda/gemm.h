// Dense layers on the GPU: a cuBLASLt wrapper for out[M,N] = a[M,K] * w[N,K]^T (+ bias) (+ c),
// bf16 operands and output, fp32 accumulation (cpu::Gemm's function, PyTorch Linear layout).
//
// Graph safety: the first call for a problem (M, N, K, epilogue, addend, pointer alignments)
// builds cuBLASLt descriptors and picks an algorithm by heuristic (host-only work, no device
// allocation, no sync) and caches it; later calls only enqueue cublasLtMatmul on the stream with
// the workspace allocated once in Create(), so they can be captured in a CUDA graph. Call Prepare
// (or run once eagerly) before capturing. Thread-safety: a Gemm is NOT thread-safe, and its single
// workspace must not be used by two kernels at once: use one Gemm per stream / engine thread.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"

namespace petal::cuda {

// out = epilogue(a * w^T + c + bias).
struct GemmParams {
  const __nv_bfloat16* a = nullptr;  // [m, k] row-major activations
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major weights (PyTorch Linear layout)
  // [n] bf16, or null. bf16 because the weights are stored in bf16 and cuBLASLt's bias type for a
  // bf16 output with fp32 compute is bf16; it is added in fp32 before the output is rounded.
  const __nv_bfloat16* bias = nullptr;
  // [m, n] addend with beta = 1 (e.g. the residual stream), or null. May equal out (in place).
  const __nv_bfloat16* c = nullptr;
  __nv_bfloat16* out = nullptr;  // [m, n] row-major
  int m = 0, n = 0, k = 0;
  // Apply GELU after bias. cuBLASLt's GELU epilogue is the tanh approximation
  // 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (cuBLAS does not document the formula; PyTorch's
  // decomposition of _addmm_activation, which uses this epilogue on CUDA, is
  // gelu(approximate="tanh")), NOT the erf GELU that BERT checkpoints use: for those run the bias
  // epilogue, then LaunchGelu (ops.h). The two differ by at most 4.7e-4 absolute.
  bool gelu_tanh = false;
};

class Gemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = 32u << 20;  // cuBLAS's advice for Hopper

  // Creates the cuBLASLt handle and allocates the workspace on the current device.
  static StatusOr<std::unique_ptr<Gemm>> Create(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Builds and caches the plan for p's problem (pointers are used only for their alignment).
  Status Prepare(const GemmParams& p);
  // Enqueues the product on `stream`; plans on first use (see the graph-safety note above).
  Status Run(const GemmParams& p, cudaStream_t stream);

  size_t num_plans() const { return plans_.size(); }

 private:
  struct Plan;
  // Everything the algorithm choice depends on. Alignments are in bytes, capped at 256.
  struct Key {
    int m, n, k;
    bool bias, gelu, c;
    int align_a, align_w, align_c, align_out, align_bias;
    auto operator<=>(const Key&) const = default;
  };

  Gemm() = default;
  Status Validate(const GemmParams& p) const;
  StatusOr<Plan*> GetPlan(const GemmParams& p);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<uint8_t> workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace petal::cuda
