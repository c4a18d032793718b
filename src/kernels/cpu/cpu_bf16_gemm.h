// The bf16 dense layers of the fast CPU engine (cpu::Linear with CpuPrecision::kBf16): weights
// converted to bf16 and reordered once at load into the blocked layout oneDNN's matmul primitive
// picks for this CPU (brgemm kernels on avx512_core_bf16 / AMX), activations converted to bf16 per
// call (AVX512-BF16 vcvtne2ps2bf16, round to nearest even), fp32 accumulation, fp32 bias and
// optional exact GELU fused as a post-op, fp32 output. oneDNN primitives are built per row count
// M on first use and kept (building one costs ~0.3-0.5 ms). Needs oneDNN >= 2.6 (matmul API).
// Thread-safety: a Bf16Gemm is immutable once created except for its primitive cache, which is
// guarded by a shared mutex; Run() may be called from several threads at once (each thread has
// its own oneDNN stream and scratchpad).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace petal::cpu {

class Bf16Gemm {
 public:
  // W [n, k] (PyTorch layout), bias [n] or null. FailedPrecondition on a CPU (or PETAL_CPU_ISA
  // cap) without avx512_bf16 / AMX-BF16.
  static StatusOr<std::shared_ptr<const Bf16Gemm>> Create(const float* w, const float* bias, int n,
                                                          int k);
  ~Bf16Gemm();

  // y[m, n] = (gelu?)(xb[m, k] W^T + b), xb in bf16 bits (row-major, k per row); y is fp32, or
  // bf16 bits (rounded to nearest even) with bf16_out.
  void Run(const uint16_t* xb, int m, void* y, bool gelu, bool bf16_out = false) const;

  // The oneDNN implementation chosen for m rows (e.g. "brg:avx512_core_bf16"), for logs/tests.
  std::string ImplName(int m) const;

  int n() const;
  int k() const;

 private:
  struct State;
  explicit Bf16Gemm(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// out[i] = bf16(x[i]) for i < count, round to nearest even (the AVX512-BF16 instruction where the
// CPU has it, else ToBf16Bits). OpenMP-parallel over inputs above 16K values; serial (and safe to
// call inside a parallel loop, e.g. per row) below that.
void ConvertToBf16(const float* x, int64_t count, uint16_t* out);

// Whether this CPU (after the PETAL_CPU_ISA cap) can run the bf16 path, and if not, why.
bool HaveBf16Gemm(std::string* why = nullptr);

}  // namespace petal::cpu
