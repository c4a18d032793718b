// Shared machinery of the GPU op tests (test-backend-ops style): bf16 rounding on the host, random
// inputs (never zeros), poisoned device outputs with guard regions, comparison metrics against the
// CPU reference, and the summary table printed at the end of the run (and written as JSON to
// $PETAL_OPS_REPORT when set). Thread-safety: test-only, single-threaded.
#pragma once

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cuda/cuda_check.h"

namespace petal::cuda::test {

using bf16 = __nv_bfloat16;

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const ::petal::Status petal_st_ = (expr);            \
    ASSERT_TRUE(petal_st_.ok()) << petal_st_.ToString(); \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(PETAL_CONCAT(petal_sor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr)   \
  auto tmp = (expr);                                \
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString(); \
  lhs = std::move(tmp).value()

// True when a CUDA device is usable; tests GTEST_SKIP otherwise.
bool HasDevice();

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  }
};

// Host bf16: round to nearest even (NaN stays NaN), and back: the one copy in kernels/cpu/bf16.h.
using cpu::FromBf16Bits;
using cpu::RoundBf16;
using cpu::ToBf16Bits;

// n values uniform in [lo, hi], rounded to bf16 (so the CPU reference sees exactly what the GPU
// sees). Deterministic in seed. Zero-free in practice (continuous distribution).
std::vector<float> RandomBf16(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);
std::vector<int32_t> RandomInts(size_t n, uint64_t seed, int32_t lo, int32_t hi);  // [lo, hi)

// Device copies of host data (bf16 from already-rounded floats; ints and floats as is).
StatusOr<DeviceBuffer<bf16>> UploadBf16(const std::vector<float>& v);
StatusOr<DeviceBuffer<int32_t>> UploadInts(const std::vector<int32_t>& v);
StatusOr<std::vector<float>> DownloadBf16(const bf16* p, size_t n);

// An output buffer of n elements followed by kGuard guard elements, all filled with `poison`
// bytes before the op runs. Afterwards Written() must hold no poison in the first n (checked by
// the comparison: 0xFF bytes read as NaN in bf16/fp32) and GuardIntact() must hold.
template <typename T>
struct Guarded {
  static constexpr size_t kGuard = 64;
  DeviceBuffer<T> buf;
  size_t n = 0;
  uint8_t poison = 0xFF;
  Status Init(size_t count, uint8_t poison_byte = 0xFF) {
    n = count;
    poison = poison_byte;
    PETAL_RETURN_IF_ERROR(buf.Allocate(n + kGuard));
    PETAL_CUDA_CHECK(cudaMemset(buf.get(), poison, buf.bytes()));
    return Status::Ok();
  }
  T* get() const { return buf.get(); }
  // Reads the guard back; true when every guard byte still holds the poison.
  bool GuardIntact() const {
    std::vector<uint8_t> g(kGuard * sizeof(T));
    if (cudaMemcpy(g.data(), buf.get() + n, g.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return false;
    for (uint8_t b : g)
      if (b != poison) return false;
    return true;
  }
  StatusOr<std::vector<T>> Fetch() const {
    std::vector<T> h(n);
    PETAL_RETURN_IF_ERROR(buf.CopyToHost(h.data(), n));
    return h;
  }
};

// Sync the device and surface asynchronous faults.
Status SyncDevice();

// Ragged batches used across tests: zero-length sequences first, in the middle and last, a
// single token, lengths that are not multiples of anything, one long sequence, many short ones.
std::vector<std::vector<int>> RaggedCases();
std::vector<int32_t> CuSeqlens(const std::vector<int>& lengths);
std::string Describe(const std::vector<int>& lengths);  // "3,0,7,1" or "50 seqs, 1234 tok"

// Error metrics of got vs ref viewed as rows x cols:
//   max_rel = max |got - ref| / max(|ref|, rms(ref row))  (relative error, floored at the row's
//             RMS so cancellation near zero does not blow it up; 0 when both are zero),
//   min_cos = min over rows of cosine(got row, ref row) (1 for two zero rows),
//   max_abs = max |got - ref| (reported, not a pass criterion),
//   nonfinite = NaN/Inf count in got (poison left = unwritten output).
struct Errors {
  double max_rel = 0;
  double max_abs = 0;  // max |got - ref| over finite got
  double min_cos = 1;
  int64_t nonfinite = 0;
  int64_t worst_index = -1;
};
Errors Compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t rows,
               int64_t cols);

struct Tolerance {
  double max_rel;
  double min_cos;
};

// Compares, records a summary row, and returns a gtest verdict with details on failure.
::testing::AssertionResult CheckClose(const std::string& op, const std::string& shape,
                                      const std::vector<float>& got, const std::vector<float>& ref,
                                      int64_t rows, int64_t cols, Tolerance tol);
// Records an exact (bitwise / integer) check in the summary.
::testing::AssertionResult RecordExact(const std::string& op, const std::string& shape,
                                       int64_t mismatches, const std::string& detail = "");
// Records a timing (GEMM throughput etc.) in the summary, informational only.
void RecordTiming(const std::string& op, const std::string& shape, double ms, double tflops,
                  double gbps);
// Median milliseconds of `iters` calls of `launch` on the legacy stream, each timed with events,
// after three warm-ups. Errors from `launch` are the caller's to check (before or after).
double MedianLaunchMs(const std::function<Status()>& launch, int iters = 20);

}  // namespace petal::cuda::test
