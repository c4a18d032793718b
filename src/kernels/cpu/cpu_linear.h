// The fast CPU engine's dense layers: y = epilogue(x W^T + b) through oneDNN's GEMMs, which use
// the same OpenMP threads as every other CPU op (no second BLAS thread pool spinning against
// them). Precisions:
//   fp32  dnnl_sgemm on a 64-byte-aligned copy of the weights made at load (oneDNN's kernels
//         take alignment-dependent paths, so unaligned weights could differ in the last bit from
//         one load to the next).
//   int8  weights quantised once at load, per output channel, symmetric, to 7 bits ([-63, 63]:
//         AVX2/AVX-512 without VNNI add u8*s8 pairs in saturating int16, and 255*63*2 fits);
//         activations quantised per row (token), symmetric, 8 bits, stored as u8 with zero point
//         128; dnnl_gemm_u8s8s32 accumulates in int32 and the epilogue rescales in fp32.
//   bf16  (avx512_bf16 / AMX-BF16 CPUs only) weights reordered to bf16 once at load, activations
//         converted to bf16 per call, fp32 accumulation and output, through oneDNN's matmul
//         primitive (cpu_bf16_gemm.h); bias and GELU fused as its post-ops.
// Epilogues: bias, then optionally exact GELU, or SiLU(gate) * up on a [gate | up] output.
// Thread-safety: a packed Linear is immutable; Forward() may run on several threads at once
// (scratch is per calling thread), each call parallelising internally with OpenMP.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/cpu_bf16_gemm.h"

namespace petal::cpu {

// Activation buffers for the fast path: 64-byte aligned, so that oneDNN takes the same kernel
// paths (and gives the same bits) whatever the heap looked like.
template <typename T>
struct Aligned64Allocator {
  using value_type = T;
  Aligned64Allocator() = default;
  template <typename U>
  Aligned64Allocator(const Aligned64Allocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const Aligned64Allocator<U>&) const {
    return true;
  }
};
using AlignedFloats = std::vector<float, Aligned64Allocator<float>>;

// A 64-byte-aligned buffer of at least n floats owned by the calling thread, one per slot
// (0..7), kept across calls: the forwards keep their activations here rather than allocating
// (and page-faulting: ~10% of a tiny Qwen3 forward) them per call. Contents are unspecified; a
// later call with the same slot on the same thread may move it.
float* ThreadBuffer(int slot, size_t n);

enum class CpuPrecision { kFp32 = 0, kInt8 = 1, kBf16 = 2 };

// "fp32" | "int8" | "bf16"; anything else is InvalidArgument.
StatusOr<CpuPrecision> ParseCpuPrecision(const std::string& name);
const char* CpuPrecisionName(CpuPrecision p);

enum class Epilogue {
  kNone,     // y = x W^T + b
  kGelu,     // y = gelu(x W^T + b)
  kSiluMul,  // z = x W^T + b is [m, 2 * n/2] = [gate | up]; y[m, n/2] = silu(gate) * up
};

class Linear {
 public:
  Linear() = default;
  // Packs W [n, k] (PyTorch layout) and bias [n] (may be null); the Linear keeps its own copies,
  // so the caller may free its fp32 weights afterwards. bf16 on a CPU (or PETAL_CPU_ISA cap)
  // without avx512_bf16 / AMX-BF16: FailedPrecondition.
  static StatusOr<Linear> Pack(const float* w, const float* bias, int n, int k, CpuPrecision p);

  // y = epilogue(x[m, k] W^T + b). y is [m, n] (kSiluMul: [m, n / 2]). x and y must not alias.
  void Forward(const float* x, int m, float* y, Epilogue e = Epilogue::kNone) const;

  // bf16 Linears only: the same from activations already in bf16 (xb [m, k]), so that the
  // producer writes them in bf16 (AddLayerNorm's out_bf16, a ForwardBf16Out). y is fp32;
  // ForwardBf16Out's y is bf16 [m, n] (kNone or kGelu).
  void ForwardBf16(const uint16_t* xb, int m, float* y, Epilogue e = Epilogue::kNone) const;
  void ForwardBf16Out(const uint16_t* xb, int m, uint16_t* y, Epilogue e = Epilogue::kNone) const;

  int n() const { return n_; }
  int k() const { return k_; }
  CpuPrecision precision() const { return precision_; }

 private:
  CpuPrecision precision_ = CpuPrecision::kFp32;
  int n_ = 0, k_ = 0;
  std::shared_ptr<float> w_;              // fp32: [n, k], 64-byte aligned (shared by copies)
  std::vector<int8_t> wq_;                // int8: [n, k], values in [-63, 63]
  std::vector<float> wscale_;             // int8: [n], W[j,:] ~= wq_[j,:] * wscale_[j]
  std::vector<float> bias_;               // [n], empty if no bias
  std::shared_ptr<const Bf16Gemm> bf16_;  // bf16: packed weights and bias
};

}  // namespace petal::cpu
