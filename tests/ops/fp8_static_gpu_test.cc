// FP8 static-scale tests (label gpu, part of fp8_gpu_test): the three quantisers with a
// per-tensor scale read from device memory (fp8_ops.h, static_scale) against
// QuantizeRowsFp8StaticHost (the CPU reference of the static formula), the calibration op
// LaunchRowAmaxBf16 against a host maximum, and a CUDA-graph replay that reads a new static
// scale. Inputs are random rows with per-row magnitudes spread over 2^-4 .. 2^4 and values beyond
// the calibrated range, so saturation at +-448 is exercised.
// Tolerances: the same e4m3 bytes as the host formula where the kernel's fp32 inputs equal the
// host's (plain rows; bf16 inputs), at most one e4m3 step for RMSNorm (its sum of squares is
// reduced in another order) and SwiGLU (device expf vs std::exp); scales bit-exact (copied);
// row maxima exact (a maximum of bf16 values has no rounding).
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/fp8_ops.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class Fp8StaticGpuTest : public GpuTest {};

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

StatusOr<DeviceBuffer<float>> UploadScalars(const std::vector<float>& v) {
  DeviceBuffer<float> d;
  PETAL_RETURN_IF_ERROR(d.Allocate(v.size()));
  PETAL_RETURN_IF_ERROR(d.CopyFromHost(v.data(), v.size()));
  return d;
}

StatusOr<std::vector<uint8_t>> FetchBytes(const Guarded<fp8>& g) {
  std::vector<uint8_t> h(g.n);
  PETAL_CUDA_CHECK(cudaMemcpy(h.data(), g.get(), g.n, cudaMemcpyDeviceToHost));
  return h;
}

// Rows of magnitudes 2^-4 .. 2^4 (bf16-exact values).
std::vector<float> SpreadRows(int rows, int dim, uint64_t seed) {
  std::vector<float> v = RandomBf16(size_t(rows) * dim, seed, -1.f, 1.f);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < dim; ++i) v[size_t(r) * dim + i] *= std::ldexp(1.f, (r % 9) - 4);
  return v;
}

struct StaticDiff {
  int64_t bytes_differ = 0;
  int max_steps = 0;
  int64_t scale_differ = 0;
  int64_t saturated = 0;  // host codes at +-448 (0x7e / 0xfe)
};
StaticDiff DiffStatic(const std::vector<float>& v, int rows, int dim, float s,
                      const std::vector<uint8_t>& q, const std::vector<float>& scale) {
  std::vector<uint8_t> hq(v.size());
  std::vector<float> hs(rows);
  QuantizeRowsFp8StaticHost(v.data(), rows, dim, s, hq.data(), hs.data());
  StaticDiff d;
  for (size_t i = 0; i < hq.size(); ++i) {
    d.saturated += (hq[i] & 0x7f) == 0x7e;
    if (hq[i] == q[i]) continue;
    ++d.bytes_differ;
    const int steps =
        (hq[i] & 0x80) != (q[i] & 0x80) ? 99 : std::abs(int(hq[i] & 0x7f) - int(q[i] & 0x7f));
    d.max_steps = std::max(d.max_steps, steps);
  }
  for (int r = 0; r < rows; ++r) d.scale_differ += hs[r] != scale[r];
  return d;
}

TEST_F(Fp8StaticGpuTest, HostReferenceSaturatesAndKeepsInRangeValues) {
  // The static formula itself: an in-range value round-trips within e4m3's relative step (2^-4),
  // and values beyond the calibrated amax clamp to +-448 * s.
  const float s = 2.f / 448.f;  // calibrated amax 2
  const std::vector<float> v = {0.f, 1.f, -1.5f, 2.f, 3.f, -100.f, 1e-3f, 0.37f,
                                0.f, 0.f, 0.f,   0.f, 0.f, 0.f,    0.f,   0.f};
  std::vector<uint8_t> q(v.size());
  std::vector<float> sc(1);
  QuantizeRowsFp8StaticHost(v.data(), 1, int(v.size()), s, q.data(), sc.data());
  EXPECT_EQ(sc[0], s);
  for (size_t i = 0; i < v.size(); ++i) {
    const float back = Fp8ToFloatHost(q[i]) * s;
    if (std::fabs(v[i]) <= 2.f) {
      EXPECT_NEAR(back, v[i], std::fabs(v[i]) * 0.0625f + 1e-4f) << i;
    } else {
      EXPECT_EQ(std::fabs(back), 448.f * s) << i;
      EXPECT_EQ(back < 0, v[i] < 0) << i;
    }
  }
}

TEST_F(Fp8StaticGpuTest, QuantizeRowsStaticMatchesHostFormula) {
  for (auto [rows, dim] : {std::pair{1, 16}, {7, 1024}, {300, 2048}, {64, 9728}}) {
    for (bool from_bf16 : {false, true}) {
      const std::string shape =
          std::to_string(rows) + "x" + std::to_string(dim) + (from_bf16 ? " bf16" : " f32");
      SCOPED_TRACE(shape);
      const std::vector<float> v = SpreadRows(rows, dim, 21 + dim);
      // Calibrated amax 4: rows of magnitude 8 and 16 saturate partly.
      const float s = 4.f / 448.f;
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> f32, UploadScalars(v));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> b16, UploadBf16(v));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> d_s, UploadScalars({s}));
      Guarded<fp8> q;
      Guarded<float> sc;
      ASSERT_OK(q.Init(v.size()));
      ASSERT_OK(sc.Init(rows));
      QuantizeRowsFp8Params p;
      if (from_bf16) {
        p.in_bf16 = b16.get();
      } else {
        p.in_f32 = f32.get();
      }
      p.out = q.get();
      p.scale = sc.get();
      p.rows = rows;
      p.dim = dim;
      p.static_scale = d_s.get();
      ASSERT_OK(LaunchQuantizeRowsFp8(p, nullptr));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
      ASSERT_OK_AND_ASSIGN(auto hs, sc.Fetch());
      const StaticDiff d = DiffStatic(v, rows, dim, s, hq, hs);
      EXPECT_TRUE(q.GuardIntact() && sc.GuardIntact());
      EXPECT_EQ(d.bytes_differ, 0);
      EXPECT_EQ(d.scale_differ, 0);
      if (rows >= 7) {
        EXPECT_GT(d.saturated, 0);
      }
      EXPECT_TRUE(RecordExact("QuantizeRowsFp8 static", shape, d.bytes_differ,
                              std::to_string(d.saturated) + " saturated"));
    }
  }
}

TEST_F(Fp8StaticGpuTest, AddRmsNormFp8StaticMatchesReference) {
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
      const float s = 3.f / 448.f;  // normed values reach ~2.6: a few saturate
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_res, UploadBf16(res));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_x, UploadBf16(x));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_w, UploadBf16(w));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> d_s, UploadScalars({s}));
      Guarded<fp8> q;
      Guarded<float> sc;
      ASSERT_OK(q.Init(n));
      ASSERT_OK(sc.Init(rows));
      AddRmsNormFp8Params p{with_x ? d_x.get() : nullptr,
                            d_res.get(),
                            d_w.get(),
                            1e-6f,
                            q.get(),
                            sc.get(),
                            rows,
                            dim};
      p.static_scale = d_s.get();
      ASSERT_OK(LaunchAddRmsNormFp8(p, nullptr));
      ASSERT_OK(SyncDevice());
      ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
      ASSERT_OK_AND_ASSIGN(auto hs, sc.Fetch());
      ASSERT_OK_AND_ASSIGN(auto new_res, DownloadBf16(d_res.get(), n));
      const StaticDiff d = DiffStatic(v, rows, dim, s, hq, hs);
      EXPECT_TRUE(q.GuardIntact() && sc.GuardIntact());
      EXPECT_LE(d.max_steps, 1);
      EXPECT_LE(d.bytes_differ, int64_t(n / 100) + 1);
      EXPECT_EQ(d.scale_differ, 0);
      EXPECT_EQ(new_res, sum);
      EXPECT_TRUE(
          RecordExact("AddRmsNormFp8 static",
                      std::to_string(rows) + "x" + std::to_string(dim) + (with_x ? "+x" : ""),
                      d.max_steps > 1 ? d.bytes_differ : 0,
                      std::to_string(d.bytes_differ) + " bytes 1 step apart"));
    }
  }
}

TEST_F(Fp8StaticGpuTest, SiluMulFp8StaticMatchesHostFormula) {
  for (auto [rows, inter] : {std::pair{1, 3072}, {77, 3072}, {9, 9728}}) {
    const size_t n = size_t(rows) * inter;
    std::vector<float> gu = RandomBf16(2 * n, 9, -4.f, 4.f), v(n);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < inter; ++i) {
        const float g = gu[size_t(r) * 2 * inter + i], u = gu[size_t(r) * 2 * inter + inter + i];
        v[size_t(r) * inter + i] = g / (1.f + std::exp(-g)) * u;
      }
    const float s = 8.f / 448.f;  // |silu(g) u| reaches ~16: the largest saturate
    ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_gu, UploadBf16(gu));
    ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> d_s, UploadScalars({s}));
    Guarded<fp8> q;
    Guarded<float> sc;
    ASSERT_OK(q.Init(n));
    ASSERT_OK(sc.Init(rows));
    ASSERT_OK(LaunchSiluMulFp8({d_gu.get(), q.get(), sc.get(), rows, inter, d_s.get()}, nullptr));
    ASSERT_OK(SyncDevice());
    ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
    ASSERT_OK_AND_ASSIGN(auto hs, sc.Fetch());
    const StaticDiff d = DiffStatic(v, rows, inter, s, hq, hs);
    EXPECT_TRUE(q.GuardIntact() && sc.GuardIntact());
    EXPECT_LE(d.max_steps, 1);
    EXPECT_LE(d.bytes_differ, int64_t(n / 1000) + 1);
    EXPECT_EQ(d.scale_differ, 0);
  }
}

TEST_F(Fp8StaticGpuTest, RowAmaxMatchesHost) {
  for (auto [rows, dim] : {std::pair{1, 16}, {65, 1024}, {300, 3072}, {5, 9728}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim));
    std::vector<float> v = SpreadRows(rows, dim, 31 + dim);
    if (rows > 1) std::fill(v.begin() + dim, v.begin() + 2 * dim, 0.f);  // an all-zero row
    std::vector<float> want(rows, 0.f);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < dim; ++i) want[r] = std::max(want[r], std::fabs(v[size_t(r) * dim + i]));
    ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> d_v, UploadBf16(v));
    Guarded<float> out;
    ASSERT_OK(out.Init(rows));
    ASSERT_OK(LaunchRowAmaxBf16({d_v.get(), out.get(), rows, dim}, nullptr));
    ASSERT_OK(SyncDevice());
    ASSERT_OK_AND_ASSIGN(auto got, out.Fetch());
    EXPECT_TRUE(out.GuardIntact());
    EXPECT_EQ(got, want);
  }
  EXPECT_FALSE(LaunchRowAmaxBf16({nullptr, nullptr, 1, 16}, nullptr).ok());
}

TEST_F(Fp8StaticGpuTest, GraphReplayReadsNewStaticScale) {
  const int rows = 64, dim = 1024;
  const std::vector<float> v = SpreadRows(rows, dim, 41);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer<bf16> b16, UploadBf16(v));
  float s = 2.f / 448.f;
  ASSERT_OK_AND_ASSIGN(DeviceBuffer<float> d_s, UploadScalars({s}));
  Guarded<fp8> q;
  Guarded<float> sc;
  ASSERT_OK(q.Init(v.size()));
  ASSERT_OK(sc.Init(rows));
  QuantizeRowsFp8Params p;
  p.in_bf16 = b16.get();
  p.out = q.get();
  p.scale = sc.get();
  p.rows = rows;
  p.dim = dim;
  p.static_scale = d_s.get();
  cudaStream_t st;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  ASSERT_OK(LaunchQuantizeRowsFp8(p, st));
  ASSERT_CUDA(cudaStreamEndCapture(st, &graph));
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (float amax : {2.f, 16.f}) {
    s = amax / 448.f;
    ASSERT_OK(d_s.CopyFromHost(&s, 1));
    ASSERT_CUDA(cudaGraphLaunch(exec, st));
    ASSERT_CUDA(cudaStreamSynchronize(st));
    ASSERT_OK_AND_ASSIGN(auto hq, FetchBytes(q));
    ASSERT_OK_AND_ASSIGN(auto hs, sc.Fetch());
    const StaticDiff d = DiffStatic(v, rows, dim, s, hq, hs);
    EXPECT_EQ(d.bytes_differ, 0) << "amax " << amax;
    EXPECT_EQ(d.scale_differ, 0) << "amax " << amax;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
}

}  // namespace
}  // namespace petal::cuda::test
