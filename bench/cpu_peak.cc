// petal_cpu_peak: this CPU's fp32 ceiling, for docs/performance.md's CPU bound (issue 21).
//   petal_cpu_peak [--threads N] [--seconds S]
// 1. FMA peak: each of N OpenMP threads runs independent chains of 8-wide FMAs (12 accumulators,
//    more than FMA latency x FMA ports on any AVX2 core) from registers only; FLOP/s per thread,
//    the best of three runs.
// 2. oneDNN sgemm (the GEMM the fast CPU path calls) at the MiniLM 32 x 128 shapes and a large
//    square one, with N threads: GFLOP/s and the fraction of N x (1) it reaches.
// Prints a table and one JSON line. Thread-safety: a single-threaded driver of OpenMP regions.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FLOP/s of one thread over ~seconds of register-only FMAs.
double FmaPeakOneThread(double seconds) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + 1e-7f * i);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  constexpr long kInner = 1 << 20;
  long iters = 0;
  const double t0 = Now();
  double t1 = t0;
  while (t1 - t0 < seconds) {
    for (long r = 0; r < kInner; ++r) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
    }
    iters += kInner;
    t1 = Now();
  }
  float sink = 0;
  for (int i = 0; i < 12; ++i) {
    alignas(32) float v[8];
    _mm256_store_ps(v, a[i]);
    sink += v[0];
  }
  if (sink == 12345.0f) std::puts("");  // keeps the chains live
  return static_cast<double>(iters) * 12 * 8 * 2 / (t1 - t0);
#else
  (void)seconds;
  return 0;
#endif
}

// GFLOP/s of dnnl_sgemm('N', 'T') for y[m, n] = x[m, k] w[n, k]^T over ~seconds.
double SgemmRate(int m, int n, int k, double seconds) {
  std::vector<float> x(static_cast<size_t>(m) * k, 0.01f), w(static_cast<size_t>(n) * k, 0.02f),
      y(static_cast<size_t>(m) * n);
  dnnl_sgemm('N', 'T', m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
  long reps = 0;
  const double t0 = Now();
  double t1 = t0;
  while (t1 - t0 < seconds || reps < 3) {
    dnnl_sgemm('N', 'T', m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
    ++reps;
    t1 = Now();
  }
  return 2.0 * m * n * k * reps / (t1 - t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 1.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: petal_cpu_peak [--threads N] [--seconds S]\n");
      return 2;
    }
  }
  omp_set_num_threads(threads);
  std::vector<double> per(threads, 0);
  // The best of three runs: a KVM guest's clock and its neighbours move the figure by 20%+.
  for (int trial = 0; trial < 3; ++trial) {
#pragma omp parallel num_threads(threads)
    {
      const double r = FmaPeakOneThread(seconds / 3);
      per[omp_get_thread_num()] = std::max(per[omp_get_thread_num()], r);
    }
  }
  double total = 0;
  for (double p : per) total += p;
  std::printf("FMA peak: %.1f GFLOP/s per thread (%d threads, %.1f in all)\n",
              total / threads / 1e9, threads, total / 1e9);
  struct Shape {
    const char* name;
    int m, n, k;
  } shapes[] = {{"minilm qkv 4096x1152x384", 4096, 1152, 384},
                {"minilm ffn1 4096x1536x384", 4096, 1536, 384},
                {"minilm ffn2 4096x384x1536", 4096, 384, 1536},
                {"square 2048x2048x2048", 2048, 2048, 2048}};
  std::string json = "{\"threads\":" + std::to_string(threads) +
                     ",\"fma_peak_gflops_per_thread\":" + std::to_string(total / threads / 1e9) +
                     ",\"sgemm\":{";
  bool first = true;
  for (const Shape& s : shapes) {
    const double g = SgemmRate(s.m, s.n, s.k, seconds);
    std::printf("oneDNN sgemm %-28s %7.1f GFLOP/s (%.0f%% of the FMA peak)\n", s.name, g,
                100.0 * g * 1e9 / total);
    json += std::string(first ? "" : ",") + "\"" + s.name + "\":" + std::to_string(g);
    first = false;
  }
  std::printf("%s}}\n", json.c_str());
  return 0;
}
