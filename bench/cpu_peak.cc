// petal_cpu_peak: this CPU's fp32 ceiling, for docs/performance.md's CPU bound (issue 21).
//   petal_cpu_peak [--threads N] [--seconds S]
// 1. FMA peak: each of N OpenMP threads runs independent chains of FMAs of the widest vector the
//    CPU has (8-wide AVX2 or 16-wide AVX-512; 12 / 16 accumulators, more than FMA latency x FMA
//    ports on any such core) from registers only; FLOP/s per thread, the best of three runs.
//    Where the CPU has AVX512-BF16, the same for VDPBF16PS (64 FLOP each: the bf16 path's ceiling).
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

#include "kernels/cpu/cpu_bf16_gemm.h"
#include "kernels/cpu/cpu_features.h"

// GCC 12 flags its own _mm512_reduce_add_ps (an _mm512_undefined source) once inlined: a false
// positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

#if defined(__AVX2__) && defined(__FMA__)
// The same with 16-wide FMAs (bf16 = false) or VDPBF16PS (bf16 = true), 16 accumulators; only
// called where DetectCpuFeatures() has AVX-512 (and AVX512-BF16).
__attribute__((target("avx512f,avx512bf16"))) double Avx512PeakOneThread(double seconds,
                                                                         bool bf16) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + 1e-7f * i);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  const __m512bh bx = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f7f));  // ~0.996
  const __m512bh by = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3380));  // ~6e-8
  constexpr long kInner = 1 << 20;
  long iters = 0;
  const double t0 = Now();
  double t1 = t0;
  while (t1 - t0 < seconds) {
    if (bf16) {
      for (long r = 0; r < kInner; ++r) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbf16_ps(a[i], bx, by);
      }
    } else {
      for (long r = 0; r < kInner; ++r) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
      }
    }
    iters += kInner;
    t1 = Now();
  }
  float sink = 0;
  for (int i = 0; i < 16; ++i) sink += _mm512_reduce_add_ps(a[i]);
  if (sink == 12345.0f) std::puts("");  // keeps the chains live
  // An FMA lane is 2 FLOP; a VDPBF16PS lane 4 (two products, two adds).
  return static_cast<double>(iters) * 16 * 16 * (bf16 ? 4 : 2) / (t1 - t0);
}
#endif

// The best of three runs on each of `threads` threads; the sum over threads.
template <typename F>
double PeakAllThreads(int threads, F one_thread) {
  std::vector<double> per(threads, 0);
  // The best of three runs: a KVM guest's clock and its neighbours move the figure by 20%+.
  for (int trial = 0; trial < 3; ++trial) {
#pragma omp parallel num_threads(threads)
    {
      const double r = one_thread();
      per[omp_get_thread_num()] = std::max(per[omp_get_thread_num()], r);
    }
  }
  double total = 0;
  for (double p : per) total += p;
  return total;
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

// GFLOP/s of the bf16 path's GEMM (cpu::Bf16Gemm: oneDNN's bf16 matmul, fp32 output) for
// y[m, n] = x[m, k] w[n, k]^T over ~seconds; 0 without AVX512-BF16.
double Bf16GemmRate(int m, int n, int k, double seconds) {
  std::vector<float> w(static_cast<size_t>(n) * k, 0.02f), y(static_cast<size_t>(m) * n);
  std::vector<uint16_t> x(static_cast<size_t>(m) * k, 0x3c23);  // ~0.01
  auto g = petal::cpu::Bf16Gemm::Create(w.data(), nullptr, n, k);
  if (!g.ok()) return 0;
  (*g)->Run(x.data(), m, y.data(), false);
  long reps = 0;
  const double t0 = Now();
  double t1 = t0;
  while (t1 - t0 < seconds || reps < 3) {
    (*g)->Run(x.data(), m, y.data(), false);
    ++reps;
    t1 = Now();
  }
  return 2.0 * m * n * k * reps / (t1 - t0) / 1e9;
}

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
  const petal::cpu::CpuFeatures& f = petal::cpu::DetectCpuFeatures();
  const double total = PeakAllThreads(threads, [&] {
#if defined(__AVX2__) && defined(__FMA__)
    if (f.avx512 && f.avx512_bf16) return Avx512PeakOneThread(seconds / 3, false);
#endif
    return FmaPeakOneThread(seconds / 3);
  });
  std::printf("FMA peak: %.1f GFLOP/s per thread (%d threads, %.1f in all; %s)\n",
              total / threads / 1e9, threads, total / 1e9,
              f.avx512 && f.avx512_bf16 ? "16-wide" : "8-wide");
  double bf16_total = 0;
#if defined(__AVX2__) && defined(__FMA__)
  if (f.avx512 && f.avx512_bf16) {
    bf16_total = PeakAllThreads(threads, [&] { return Avx512PeakOneThread(seconds / 3, true); });
    std::printf("VDPBF16PS peak: %.1f GFLOP/s per thread\n", bf16_total / threads / 1e9);
  }
#endif
  struct Shape {
    const char* name;
    int m, n, k;
  } shapes[] = {{"minilm qkv 4096x1152x384", 4096, 1152, 384},
                {"minilm ffn1 4096x1536x384", 4096, 1536, 384},
                {"minilm ffn2 4096x384x1536", 4096, 384, 1536},
                {"square 2048x2048x2048", 2048, 2048, 2048}};
  std::string json =
      "{\"threads\":" + std::to_string(threads) +
      ",\"fma_peak_gflops_per_thread\":" + std::to_string(total / threads / 1e9) +
      ",\"bf16_dot_peak_gflops_per_thread\":" + std::to_string(bf16_total / threads / 1e9) +
      ",\"sgemm\":{";
  bool first = true;
  for (const Shape& s : shapes) {
    const double g = SgemmRate(s.m, s.n, s.k, seconds);
    std::printf("oneDNN sgemm %-28s %7.1f GFLOP/s (%.0f%% of the FMA peak)\n", s.name, g,
                100.0 * g * 1e9 / total);
    json += std::string(first ? "" : ",") + "\"" + s.name + "\":" + std::to_string(g);
    first = false;
  }
  json += "}";
  if (bf16_total > 0) {
    json += ",\"bf16_gemm\":{";
    first = true;
    for (const Shape& s : shapes) {
      const double g = Bf16GemmRate(s.m, s.n, s.k, seconds);
      std::printf("oneDNN bf16 matmul %-22s %7.1f GFLOP/s (%.0f%% of the VDPBF16PS peak)\n", s.name,
                  g, 100.0 * g * 1e9 / bf16_total);
      json += std::string(first ? "" : ",") + "\"" + s.name + "\":" + std::to_string(g);
      first = false;
    }
    json += "}";
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}
