// FP8 tests (label gpu): the quantisation kernels of fp8_ops.h against QuantizeRowsFp8Host (the
// formula on the CPU), and the fp8 GEMM (gemm.h with a8/w8) against a float64 product of the
// dequantised operands (every 16th row), for the Qwen3 0.6B and 4B dense shapes at M = 2048 and
// 2304 tokens (fp8 GEMMs refuse M < kFp8MinM: cuBLASLt's kernels failed this test at M <= 128 on
// the H200), plain, + bias and + c in place; plus a CUDA-graph replay that reads new scales.
// Tolerances: quantisers must give the same e4m3 bytes as the host formula on the same fp32 values
// (exact where the kernel's fp32 inputs equal the host's: plain rows and SwiGLU) and at most one
// e4m3 step apart for RMSNorm (its sum of squares is reduced in another order); the GEMM has only
// accumulation and bf16-output rounding left, so max_rel <= 1e-2 (2e-2 with an addend), as for
// bf16.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/fp8_ops.h"
#include "kernels/cuda/gemm.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class Fp8GpuTest : public GpuTest {};

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

StatusOr<DeviceBuffer<fp8>> UploadFp8(const std::vector<uint8_t>& q) {
  DeviceBuffer<fp8> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(q.size()));
  PETAL_CUDA_CHECK(cudaMemcpy(d.get(), q.data(), q.size(), cudaMemcpyHostToDevice));
  return d;
}

StatusOr<DeviceBuffer<float>> UploadF32(const std::vector<float>& v) {
  DeviceBuffer<float> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(v.size()));
  PETAL_RETURN_IF_ERROR(d.CopyFromHost(v.data(), v.size()));
  return d;
}

// Compares device e4m3 rows + scales with the host formula on `v` (fp32 rows). Returns the number
// of bytes that differ and the largest difference in e4m3 steps (codes of equal sign).
struct QuantDiff {
  int64_t bytes_differ = 0;
  int max_steps = 0;
  double max_scale_rel = 0;
};
QuantDiff DiffQuant(const std::vector<float>& v, int rows, int dim, const std::vector<uint8_t>& q,
                    const std::vector<float>& scale) {
  std::vector<uint8_t> hq(v.size());
  std::vector<float> hs(rows);
  QuantizeRowsFp8Host(v.data(), rows, dim, hq.data(), hs.data());
  QuantDiff d;
  for (size_t i = 0; i < hq.size(); ++i) {
    if (hq[i] == q[i]) continue;
    ++d.bytes_differ;
    const int steps =
        (hq[i] & 0x80) != (q[i] & 0x80) ? 99 : std::abs(int(hq[i] & 0x7f) - int(q[i] & 0x7f));
    d.max_steps = std::max(d.max_steps, steps);
  }
  for (int r = 0; r < rows; ++r)
    d.max_scale_rel = std::max(d.max_scale_rel, double(std::fabs(hs[r] - scale[r]) / hs[r]));
  return d;
}

StatusOr<std::vector<uint8_t>> FetchBytes(const Guarded<fp8>& g) {
  std::vector<uint8_t> h(g.n);
  PETAL_CUDA_CHECK(cudaMemcpy(h.data(), g.get(), g.n, cudaMemcpyDeviceToHost));
  return h;
}

TEST_F(Fp8GpuTest, QuantizeRowsMatchesHostFormula) {
  for (auto [rows, dim] : {std::pair{1, 16}, {7, 1024}, {300, 2048}, {64, 9728}}) {
    for (bool from_bf16 : {false, true}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim) +
                   (from_bf16 ? " bf16" : " f32"));
      // Rows of very different magnitudes (outlier channels are what per-row scales are for).
      std::vector<float> v = RandomBf16(size_t(rows) * dim, 11 + dim, -1.f, 1.f);
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < dim; ++i) v[size_t(r) * dim + i] *= std::ldexp(1.f, (r % 9) - 4);
      v[dim / 2] = 300.f;  // one outlier in row 0
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> f32, UploadF32(v));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> b16, UploadBf16(v));
      Guarded<fp8> q;
      Guarded<float> s;
      ASSERT_OK(q.Init(v.size()));
      ASSERT_OK(s.Init(rows));
      QuantizeRowsFp8Params p;
      if (from_bf16) {
        p.in_bf16 = b16.get();
      } else {
        p.in_f32 = f32.get();
      }
      p.out = q.get();
      p.scale = s.get();
      p.rows = rows;
      p.dim = dim;
      ASSERT_OK(LaunchQuantizeRowsFp8(p, nullptr));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
      ASSERT_OK_AND_ASSIGN(auto hs, s.Fetch());
      const QuantDiff d = DiffQuant(v, rows, dim, hq, hs);  // v is bf16-exact: same fp32 inputs
      EXPECT_TRUE(q.GuardIntact() && s.GuardIntact());
      EXPECT_EQ(d.bytes_differ, 0);
      EXPECT_EQ(d.max_scale_rel, 0.0);
      EXPECT_TRUE(RecordExact("QuantizeRowsFp8", std::to_string(rows) + "x" + std::to_string(dim),
                              d.bytes_differ));
    }
  }
}

TEST_F(Fp8GpuTest, AddRmsNormFp8MatchesReference) {
  for (auto [rows, dim] : {std::pair{1, 1024}, {33, 1024}, {130, 2560}}) {
    for (bool with_x : {false, true}) {
      const size_t n = size_t(rows) * dim;
      std::vector<float> res = RandomBf16(n, 5, -2.f, 2.f), x = RandomBf16(n, 6),
                         w = RandomBf16(dim, 7, 0.5f, 1.5f);
      std::vector<float> sum(n), v(n);
      for (size_t i = 0; i < n; ++i) sum[i] = with_x ? RoundBf16(res[i] + x[i]) : res[i];
      for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < dim; ++i)
          ss += double(sum[size_t(r) * dim + i]) * sum[size_t(r) * dim + i];
        const float inv = float(1.0 / std::sqrt(ss / dim + 1e-6));
        for (int i = 0; i < dim; ++i)
          v[size_t(r) * dim + i] = sum[size_t(r) * dim + i] * inv * w[i];
      }
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_res, UploadBf16(res));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_x, UploadBf16(x));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_w, UploadBf16(w));
      Guarded<fp8> q;
      Guarded<float> s;
      ASSERT_OK(q.Init(n));
      ASSERT_OK(s.Init(rows));
      ASSERT_OK(LaunchAddRmsNormFp8({with_x ? d_x.get() : nullptr, d_res.get(), d_w.get(), 1e-6f,
                                     q.get(), s.get(), rows, dim},
                                    nullptr));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
      ASSERT_OK_AND_ASSIGN(auto hs, s.Fetch());
      ASSERT_OK_AND_ASSIGN(auto new_res, DownloadBf16(d_res.get(), n));
      const QuantDiff d = DiffQuant(v, rows, dim, hq, hs);
      EXPECT_TRUE(q.GuardIntact() && s.GuardIntact());
      EXPECT_LE(d.max_steps, 1);
      EXPECT_LE(d.bytes_differ, int64_t(n / 100) + 1);
      EXPECT_LE(d.max_scale_rel, 1e-5);
      EXPECT_EQ(new_res, sum);  // residual stream written back in bf16
      EXPECT_TRUE(RecordExact(
          "AddRmsNormFp8", std::to_string(rows) + "x" + std::to_string(dim) + (with_x ? "+x" : ""),
          d.max_steps > 1 ? d.bytes_differ : 0,
          std::to_string(d.bytes_differ) + " bytes 1 step apart"));
    }
  }
}

TEST_F(Fp8GpuTest, SiluMulFp8MatchesHostFormula) {
  for (auto [rows, inter] : {std::pair{1, 3072}, {77, 3072}, {9, 9728}}) {
    const size_t n = size_t(rows) * inter;
    std::vector<float> gu = RandomBf16(2 * n, 9, -4.f, 4.f), v(n);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < inter; ++i) {
        const float g = gu[size_t(r) * 2 * inter + i], u = gu[size_t(r) * 2 * inter + inter + i];
        v[size_t(r) * inter + i] = g / (1.f + std::exp(-g)) * u;
      }
    ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_gu, UploadBf16(gu));
    Guarded<fp8> q;
    Guarded<float> s;
    ASSERT_OK(q.Init(n));
    ASSERT_OK(s.Init(rows));
    ASSERT_OK(LaunchSiluMulFp8({d_gu.get(), q.get(), s.get(), rows, inter}, nullptr));
    ASSERT_OK(SyncDevice());
    ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
    ASSERT_OK_AND_ASSIGN(auto hs, s.Fetch());
    const QuantDiff d = DiffQuant(v, rows, inter, hq, hs);
    EXPECT_TRUE(q.GuardIntact() && s.GuardIntact());
    // expf on the device and std::exp on the host may differ in the last bit.
    EXPECT_LE(d.max_steps, 1);
    EXPECT_LE(d.bytes_differ, int64_t(n / 1000) + 1);
    EXPECT_LE(d.max_scale_rel, 1e-6);
  }
}

struct Problem {
  std::vector<uint8_t> a8, w8;
  std::vector<float> sa, sw, bias, c;
};

Problem MakeProblem(int m, int n, int k, bool bias, bool c, uint64_t seed) {
  Problem p;
  std::vector<float> a = RandomBf16(size_t(m) * k, seed, -1.f, 1.f),
                     w = RandomBf16(size_t(n) * k, seed + 1, -0.05f, 0.05f);
  for (int r = 0; r < m; ++r) a[size_t(r) * k + (r * 7) % k] *= 20.f;  // per-token outliers
  p.a8.resize(a.size());
  p.w8.resize(w.size());
  p.sa.resize(m);
  p.sw.resize(n);
  QuantizeRowsFp8Host(a.data(), m, k, p.a8.data(), p.sa.data());
  QuantizeRowsFp8Host(w.data(), n, k, p.w8.data(), p.sw.data());
  if (bias) p.bias = RandomBf16(n, seed + 2);
  if (c) p.c = RandomBf16(size_t(m) * n, seed + 3);
  return p;
}

// The float64 product on every `step`-th row (keeps the reference quick at M = 2048).
std::vector<float> RowsEvery(const std::vector<float>& v, int m, int n, int step = 16) {
  std::vector<float> out;
  for (int r = 0; r < m; r += step)
    out.insert(out.end(), v.begin() + size_t(r) * n, v.begin() + size_t(r + 1) * n);
  return out;
}

std::vector<float> Reference(const Problem& p, int m, int n, int k, int step = 16) {
  std::vector<double> a(p.a8.size()), w(p.w8.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = Fp8ToFloatHost(p.a8[i]);
  for (size_t i = 0; i < w.size(); ++i) w[i] = Fp8ToFloatHost(p.w8[i]);
  std::vector<float> out;
  for (int r = 0; r < m; r += step)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      const double* ar = &a[size_t(r) * k];
      const double* wr = &w[size_t(j) * k];
      for (int i = 0; i < k; ++i) acc += ar[i] * wr[i];
      double v = acc * p.sa[r] * p.sw[j];
      if (!p.bias.empty()) v += p.bias[j];
      if (!p.c.empty()) v += p.c[size_t(r) * n + j];
      out.push_back(float(v));
    }
  return out;
}

TEST_F(Fp8GpuTest, GemmMatchesFloat64OnModelShapes) {
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"q0.6b.qkv", 4096, 1024},     {"q0.6b.o", 1024, 2048},
                          {"q0.6b.gate_up", 6144, 1024}, {"q0.6b.down", 1024, 3072},
                          {"q4b.qkv", 6144, 2560},       {"q4b.down", 2560, 9728}};
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  for (const Shape& sh : shapes) {
    for (int m : {kFp8MinM, kFp8MinM + 256}) {
      for (int variant = 0; variant < 3; ++variant) {
        const bool bias = variant == 1, c = variant == 2;
        const std::string name = std::string(sh.name) + " m=" + std::to_string(m) +
                                 (bias ? " +bias" : "") + (c ? " +c" : "");
        SCOPED_TRACE(name);
        Problem p = MakeProblem(m, sh.n, sh.k, bias, c, 100 + m + sh.n + variant);
        ASSERT_OK_AND_ASSIGN(auto a8, UploadFp8(p.a8));
        ASSERT_OK_AND_ASSIGN(auto w8, UploadFp8(p.w8));
        ASSERT_OK_AND_ASSIGN(auto sa, UploadF32(p.sa));
        ASSERT_OK_AND_ASSIGN(auto sw, UploadF32(p.sw));
        ASSERT_OK_AND_ASSIGN(auto d_bias, UploadBf16(p.bias));
        Guarded<bf16> out;
        ASSERT_OK(out.Init(size_t(m) * sh.n));
        if (c) {
          ASSERT_OK_AND_ASSIGN(auto d_c, UploadBf16(p.c));
          ASSERT_CUDA(cudaMemcpy(out.get(), d_c.get(), d_c.bytes(), cudaMemcpyDeviceToDevice));
        }
        GemmParams g;
        g.a8 = a8.get();
        g.w8 = w8.get();
        g.a_scale = sa.get();
        g.w_scale = sw.get();
        g.bias = d_bias.get();
        g.c = c ? out.get() : nullptr;  // in place, as the residual add
        g.out = out.get();
        g.m = m, g.n = sh.n, g.k = sh.k;
        ASSERT_OK(gemm->Run(g, nullptr));
        ASSERT_OK(SyncDevice());
        ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), out.n));
        EXPECT_TRUE(out.GuardIntact());
        const int rows = (m + 15) / 16;
        EXPECT_EQ(std::count_if(got.begin(), got.end(), [](float x) { return !std::isfinite(x); }),
                  0);
        EXPECT_TRUE(CheckClose("GemmFp8", name, RowsEvery(got, m, sh.n),
                               Reference(p, m, sh.n, sh.k), rows, sh.n,
                               c ? Tolerance{2e-2, 0.9999} : Tolerance{1e-2, 0.9999}));
      }
    }
  }
  std::printf("%s\n", gemm->Stats().ToString().c_str());
}

TEST_F(Fp8GpuTest, GemmGraphReplayReadsNewScales) {
  const int m = kFp8MinM, n = 1024, k = 1024;
  Problem p = MakeProblem(m, n, k, false, false, 3);
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  ASSERT_OK_AND_ASSIGN(auto a8, UploadFp8(p.a8));
  ASSERT_OK_AND_ASSIGN(auto w8, UploadFp8(p.w8));
  ASSERT_OK_AND_ASSIGN(auto sa, UploadF32(p.sa));
  ASSERT_OK_AND_ASSIGN(auto sw, UploadF32(p.sw));
  Guarded<bf16> out;
  ASSERT_OK(out.Init(size_t(m) * n));
  GemmParams g;
  g.a8 = a8.get(), g.w8 = w8.get(), g.a_scale = sa.get(), g.w_scale = sw.get(), g.out = out.get();
  g.m = m, g.n = n, g.k = k;
  cudaStream_t s;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ASSERT_OK(gemm->Run(g, s));  // plan and tune outside capture
  ASSERT_CUDA(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  ASSERT_OK(gemm->Run(g, s));
  ASSERT_CUDA(cudaStreamEndCapture(s, &graph));
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  // New scales in the same buffers: the replay must use them (2x per token, 0.5x per channel
  // on odd channels).
  for (int r = 0; r < m; ++r) p.sa[r] *= 2.f;
  for (int j = 1; j < n; j += 2) p.sw[j] *= 0.5f;
  ASSERT_OK(sa.CopyFromHost(p.sa.data(), p.sa.size()));
  ASSERT_OK(sw.CopyFromHost(p.sw.data(), p.sw.size()));
  ASSERT_CUDA(cudaGraphLaunch(exec, s));
  ASSERT_CUDA(cudaStreamSynchronize(s));
  ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), out.n));
  EXPECT_TRUE(CheckClose("GemmFp8", "graph replay, new scales", RowsEvery(got, m, n),
                         Reference(p, m, n, k), (m + 15) / 16, n, Tolerance{1e-2, 0.9999}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST_F(Fp8GpuTest, RejectsBadArguments) {
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  GemmParams g;
  g.a8 = reinterpret_cast<const fp8*>(16);
  g.m = 4, g.n = 32, g.k = 32;
  EXPECT_FALSE(gemm->Run(g, nullptr).ok());  // missing w8 / scales / out
  g.w8 = g.a8;
  g.a_scale = g.w_scale = reinterpret_cast<const float*>(16);
  g.out = reinterpret_cast<bf16*>(16);
  const Status small = gemm->Run(g, nullptr);  // m = 4 < kFp8MinM: refused before any launch
  EXPECT_FALSE(small.ok());
  EXPECT_NE(small.ToString().find("m >="), std::string::npos) << small.ToString();
  QuantizeRowsFp8Params q;
  q.rows = 1, q.dim = 24;  // not a multiple of 16
  EXPECT_FALSE(LaunchQuantizeRowsFp8(q, nullptr).ok());
}

}  // namespace
}  // namespace petal::cuda::test
