#include "op_test_util.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace petal::cuda::test {
namespace {

struct Row {
  std::string op, shape;
  bool exact = false, timing = false, pass = true;
  double max_rel = 0, max_abs = 0, min_cos = 1, tol_rel = 0, tol_cos = 0;
  int64_t mismatches = 0;
  double ms = 0, tflops = 0, gbps = 0;
};

std::vector<Row>& Rows() {
  static std::vector<Row> rows;
  return rows;
}

// Prints the table after all tests (gtest_main owns main(), so hook a global environment).
class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (Rows().empty()) return;
    std::printf("\n%-16s %-44s %10s %9s %10s %10s %9s %s\n", "op", "case", "max_rel", "tol",
                "max_abs", "min_cos", "tol", "result");
    int fails = 0;
    for (const Row& r : Rows()) {
      if (r.timing) continue;
      fails += !r.pass;
      if (r.exact) {
        std::printf("%-16s %-44s %10s %9s %10s %10s %9s %s (%" PRId64 " mismatches)\n",
                    r.op.c_str(), r.shape.c_str(), "exact", "-", "-", "-", "-",
                    r.pass ? "ok" : "FAIL", r.mismatches);
      } else {
        std::printf("%-16s %-44s %10.3e %9.1e %10.3e %10.7f %9.5f %s\n", r.op.c_str(),
                    r.shape.c_str(), r.max_rel, r.tol_rel, r.max_abs, r.min_cos, r.tol_cos,
                    r.pass ? "ok" : "FAIL");
      }
    }
    bool header = false;
    for (const Row& r : Rows()) {
      if (!r.timing) continue;
      if (!header)
        std::printf("\n%-16s %-44s %10s %10s %10s\n", "timing", "case", "ms", "TFLOP/s", "GB/s");
      header = true;
      std::printf("%-16s %-44s %10.4f %10.1f %10.1f\n", r.op.c_str(), r.shape.c_str(), r.ms,
                  r.tflops, r.gbps);
    }
    std::printf("\nops summary: %zu checks, %d failed\n", Rows().size(), fails);
    if (const char* path = std::getenv("PETAL_OPS_REPORT")) WriteJson(path);
  }

 private:
  static void WriteJson(const char* path) {
    FILE* f = std::fopen(path, "w");
    if (!f) return;
    std::fprintf(f, "[\n");
    for (size_t i = 0; i < Rows().size(); ++i) {
      const Row& r = Rows()[i];
      std::fprintf(f,
                   "  {\"op\": \"%s\", \"case\": \"%s\", \"exact\": %s, \"timing\": %s, \"pass\": "
                   "%s, \"max_rel\": %.6e, \"max_abs\": %.6e, \"tol_rel\": %.3e, \"min_cos\": "
                   "%.9f, \"tol_cos\": "
                   "%.6f, \"mismatches\": %" PRId64
                   ", \"ms\": %.6f, \"tflops\": %.3f, \"gbps\": "
                   "%.3f}%s\n",
                   r.op.c_str(), r.shape.c_str(), r.exact ? "true" : "false",
                   r.timing ? "true" : "false", r.pass ? "true" : "false", r.max_rel, r.max_abs,
                   r.tol_rel, r.min_cos, r.tol_cos, r.mismatches, r.ms, r.tflops, r.gbps,
                   i + 1 < Rows().size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
  }
};

[[maybe_unused]] ::testing::Environment* const kSummary =
    ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

// splitmix64: fast, good enough for test data, and independent of the std library's
// distributions (whose output differs between implementations).
uint64_t Next(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

bool HasDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::vector<float> RandomBf16(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
  for (auto& x : v) {
    const double u = (Next(s) >> 11) * (1.0 / 9007199254740992.0);
    x = RoundBf16(static_cast<float>(lo + (hi - lo) * u));
  }
  return v;
}

std::vector<int32_t> RandomInts(size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(n);
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 7;
  for (auto& x : v) x = lo + static_cast<int32_t>(Next(s) % static_cast<uint64_t>(hi - lo));
  return v;
}

StatusOr<DeviceBuffer<bf16>> UploadBf16(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = ToBf16Bits(v[i]);
  DeviceBuffer<bf16> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(std::max<size_t>(v.size(), 1)));
  PETAL_RETURN_IF_ERROR(d.CopyFromHost(reinterpret_cast<const bf16*>(bits.data()), v.size()));
  return d;
}

StatusOr<DeviceBuffer<int32_t>> UploadInts(const std::vector<int32_t>& v) {
  DeviceBuffer<int32_t> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(std::max<size_t>(v.size(), 1)));
  PETAL_RETURN_IF_ERROR(d.CopyFromHost(v.data(), v.size()));
  return d;
}

StatusOr<std::vector<float>> DownloadBf16(const bf16* p, size_t n) {
  std::vector<uint16_t> bits(n);
  PETAL_CUDA_CHECK(cudaMemcpy(bits.data(), p, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = FromBf16Bits(bits[i]);
  return out;
}

Status SyncDevice() {
  PETAL_CUDA_CHECK(cudaGetLastError());
  PETAL_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::Ok();
}

std::vector<std::vector<int>> RaggedCases() {
  std::vector<std::vector<int>> cases = {{1}, {3, 0, 7, 1}, {0, 5}, {77}, {1000, 0}, {0}};
  std::vector<int> many;
  uint64_t s = 12345;
  for (int i = 0; i < 50; ++i) many.push_back(i % 7 == 3 ? 0 : static_cast<int>(Next(s) % 41));
  cases.push_back(many);
  return cases;
}

std::vector<int32_t> CuSeqlens(const std::vector<int>& lengths) {
  std::vector<int32_t> cu(1, 0);
  for (int l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

std::string Describe(const std::vector<int>& lengths) {
  int total = 0;
  for (int l : lengths) total += l;
  if (lengths.size() > 6)
    return std::to_string(lengths.size()) + " seqs/" + std::to_string(total) + " tok";
  std::string out;
  for (size_t i = 0; i < lengths.size(); ++i) out += (i ? "," : "") + std::to_string(lengths[i]);
  return "seqs " + out;
}

Errors Compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t rows,
               int64_t cols) {
  Errors e;
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = got.data() + r * cols;
    const float* f = ref.data() + r * cols;
    double ss_ref = 0, ss_got = 0, dot = 0;
    for (int64_t c = 0; c < cols; ++c) {
      ss_ref += double(f[c]) * f[c];
      ss_got += double(g[c]) * g[c];
      dot += double(g[c]) * f[c];
      if (!std::isfinite(g[c])) ++e.nonfinite;
    }
    const double rms = std::sqrt(ss_ref / std::max<int64_t>(cols, 1));
    for (int64_t c = 0; c < cols; ++c) {
      const double diff = std::fabs(double(g[c]) - f[c]);
      if (std::isfinite(g[c])) e.max_abs = std::max(e.max_abs, diff);
      const double denom = std::max(std::fabs(double(f[c])), rms);
      double rel = denom > 0 ? diff / denom : (diff > 0 ? INFINITY : 0.0);
      if (!std::isfinite(g[c])) rel = INFINITY;
      if (e.worst_index < 0 || rel > e.max_rel) {
        e.max_rel = rel;
        e.worst_index = r * cols + c;
      }
    }
    double cosine;
    if (ss_ref == 0 && ss_got == 0) {
      cosine = 1;
    } else if (ss_ref == 0 || ss_got == 0) {
      cosine = 0;
    } else {
      cosine = dot / std::sqrt(ss_ref * ss_got);
    }
    if (!(cosine >= e.min_cos)) e.min_cos = std::isnan(cosine) ? -1 : cosine;
  }
  return e;
}

::testing::AssertionResult CheckClose(const std::string& op, const std::string& shape,
                                      const std::vector<float>& got, const std::vector<float>& ref,
                                      int64_t rows, int64_t cols, Tolerance tol) {
  if (got.size() != ref.size() || static_cast<int64_t>(got.size()) != rows * cols)
    return ::testing::AssertionFailure() << op << " " << shape << ": size mismatch";
  const Errors e = Compare(got, ref, rows, cols);
  Row row{op, shape};
  row.max_rel = e.max_rel;
  row.max_abs = e.max_abs;
  row.min_cos = e.min_cos;
  row.tol_rel = tol.max_rel;
  row.tol_cos = tol.min_cos;
  row.pass = e.nonfinite == 0 && e.max_rel <= tol.max_rel && e.min_cos >= tol.min_cos;
  Rows().push_back(row);
  if (row.pass) return ::testing::AssertionSuccess();
  auto fail = ::testing::AssertionFailure();
  fail << op << " [" << shape << "]: max_rel " << e.max_rel << " (tol " << tol.max_rel
       << "), max_abs " << e.max_abs << ", min_cos " << e.min_cos << " (tol " << tol.min_cos
       << "), non-finite (unwritten) " << e.nonfinite;
  if (e.worst_index >= 0)
    fail << "; worst at row " << e.worst_index / cols << " col " << e.worst_index % cols << ": got "
         << got[e.worst_index] << " ref " << ref[e.worst_index];
  return fail;
}

::testing::AssertionResult RecordExact(const std::string& op, const std::string& shape,
                                       int64_t mismatches, const std::string& detail) {
  Row row{op, shape};
  row.exact = true;
  row.mismatches = mismatches;
  row.pass = mismatches == 0;
  Rows().push_back(row);
  if (row.pass) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << op << " [" << shape << "]: " << mismatches << " mismatches " << detail;
}

void RecordTiming(const std::string& op, const std::string& shape, double ms, double tflops,
                  double gbps) {
  Row row{op, shape};
  row.timing = true;
  row.ms = ms;
  row.tflops = tflops;
  row.gbps = gbps;
  Rows().push_back(row);
}

double MedianLaunchMs(const std::function<Status()>& launch, int iters) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) (void)launch();
  std::vector<float> ms(iters);
  for (float& m : ms) {
    cudaEventRecord(start, 0);
    (void)launch();
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&m, start, stop);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace petal::cuda::test
