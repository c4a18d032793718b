// Micro-benchmark of the flash attention kernel (not a test; CTest does not run it). Prints
// TFLOP/s per shape, FLOPs = 4 * sum(len^2) * Hq * d (half for causal), timing the Run step
// (plan excluded, it runs once per forward pass) and, separately, plan + run: the median over
// `reps` trials of batches of back-to-back launches (~2 ms of GPU work each). Usage:
//   petal_attention_bench [--causal] [--reps N] [--json FILE]
// --json appends one JSON object per (shape, variant) line to FILE (JSON Lines).
// Thread-safety: a program.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_internal.h"

namespace {

#define BENCH_CHECK(expr)                                                                        \
  do {                                                                                           \
    cudaError_t e_ = (expr);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define BENCH_STATUS(expr)                                            \
  do {                                                                \
    const petal::Status s_ = (expr);                                  \
    if (!s_.ok()) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #expr, s_.ToString().c_str()); \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)

struct Shape {
  const char* name;
  int hq, hkv, d, seqs, len;
};

__global__ void FillRandom(__nv_bfloat16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = __float2bfloat16((h & 0xFFFF) / 32768.0f - 1.0f);  // [-1, 1), never all zero
  }
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool causal = false;
  int reps = 7;
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--causal")) causal = true;
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
  }
  const Shape shapes[] = {
      {"qwen3-0.6b 1x128", 16, 8, 128, 1, 128},
      {"qwen3-0.6b 1x512", 16, 8, 128, 1, 512},
      {"qwen3-0.6b 1x4096", 16, 8, 128, 1, 4096},
      {"qwen3-0.6b 100x512", 16, 8, 128, 100, 512},
      {"qwen3-0.6b 100x1024", 16, 8, 128, 100, 1024},
      {"qwen3-0.6b 100x4096", 16, 8, 128, 100, 4096},
      {"minilm 100x128", 12, 12, 32, 100, 128},
      {"d64 gqa2 100x512", 16, 8, 64, 100, 512},
  };
  std::printf("%-22s %-6s %-26s %9s %8s %9s\n", "shape", "mode", "variant (* default)", "run ms",
              "TFLOP/s", "plan+run");
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (const Shape& s : shapes) {
    const int tokens = s.seqs * s.len;
    const int64_t row = static_cast<int64_t>(s.hq + 2 * s.hkv) * s.d;
    __nv_bfloat16 *qkv, *out;
    int32_t *cu, *nseq;
    void* ws;
    BENCH_CHECK(cudaMalloc(&qkv, tokens * row * 2));
    BENCH_CHECK(cudaMalloc(&out, static_cast<int64_t>(tokens) * s.hq * s.d * 2));
    BENCH_CHECK(cudaMalloc(&cu, (s.seqs + 1) * 4));
    BENCH_CHECK(cudaMalloc(&nseq, 4));
    BENCH_CHECK(cudaMalloc(&ws, petal::cuda::AttentionWorkspaceBytes(tokens, s.seqs)));
    FillRandom<<<1024, 256, 0, stream>>>(qkv, tokens * row, 1234u);
    std::vector<int32_t> hcu(s.seqs + 1);
    for (int i = 0; i <= s.seqs; ++i) hcu[i] = i * s.len;
    BENCH_CHECK(cudaMemcpy(cu, hcu.data(), hcu.size() * 4, cudaMemcpyHostToDevice));
    BENCH_CHECK(cudaMemcpy(nseq, &s.seqs, 4, cudaMemcpyHostToDevice));

    petal::cuda::AttentionParams a;
    a.q = qkv;
    a.k = qkv + s.hq * s.d;
    a.v = qkv + (s.hq + s.hkv) * s.d;
    a.q_stride = a.k_stride = a.v_stride = row;
    a.out = out;
    a.cu_seqlens = cu;
    a.num_seqs = nseq;
    a.max_tokens = tokens;
    a.max_seqs = s.seqs;
    a.num_heads = s.hq;
    a.num_kv_heads = s.hkv;
    a.head_dim = s.d;
    a.causal = causal;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s.d));

    const double flops = 4.0 * s.seqs * double(s.len) * s.len * s.hq * s.d * (causal ? 0.5 : 1.0);
    const int default_variant = petal::cuda::DefaultFlashVariant(a);
    for (int v = 0; v < petal::cuda::FlashVariantCount(s.d); ++v) {
      if (!petal::cuda::FlashVariantSupports(s.d, v, s.hq / s.hkv)) continue;
      BENCH_STATUS(petal::cuda::PlanRaggedAttentionVariant(a, v, ws, stream));
      auto run = [&] { BENCH_STATUS(petal::cuda::RunRaggedAttentionVariant(a, v, ws, stream)); };
      auto plan_run = [&] {
        BENCH_STATUS(petal::cuda::LaunchRaggedAttentionVariant(a, v, ws, stream));
      };
      // Times `n` back-to-back launches between two events (host launch overhead overlaps the
      // GPU work, as in a real forward pass) and returns ms per launch.
      auto time_batch = [&](auto&& enqueue, int n) {
        BENCH_CHECK(cudaEventRecord(start, stream));
        for (int i = 0; i < n; ++i) enqueue();
        BENCH_CHECK(cudaEventRecord(stop, stream));
        BENCH_CHECK(cudaEventSynchronize(stop));
        float ms;
        BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
        return ms / n;
      };
      const float first = time_batch(run, 3);  // warm-up and size estimate
      const int n = std::clamp(static_cast<int>(2.0f / std::max(first, 1e-4f)), 1, 500);
      std::vector<float> run_ms, all_ms;
      for (int i = 0; i < reps; ++i) {
        run_ms.push_back(time_batch(run, n));
        all_ms.push_back(time_batch(plan_run, n));
      }
      BENCH_CHECK(cudaGetLastError());
      const float med = Median(run_ms);
      const std::string variant =
          petal::cuda::FlashVariantName(s.d, v) + (v == default_variant ? " *" : "");
      std::printf("%-22s %-6s %-26s %9.4f %8.1f %9.4f\n", s.name, causal ? "causal" : "bidir",
                  variant.c_str(), med, flops / (med * 1e-3) / 1e12, Median(all_ms));
      if (json_path != nullptr) {
        if (FILE* f = std::fopen(json_path, "a")) {
          std::fprintf(f,
                       "{\"shape\": \"%s\", \"mode\": \"%s\", \"variant\": \"%s\", "
                       "\"default\": %s, \"run_ms\": %.5f, \"tflops\": %.2f, "
                       "\"plan_run_ms\": %.5f}\n",
                       s.name, causal ? "causal" : "bidir",
                       petal::cuda::FlashVariantName(s.d, v).c_str(),
                       v == default_variant ? "true" : "false", med, flops / (med * 1e-3) / 1e12,
                       Median(all_ms));
          std::fclose(f);
        }
      }
    }
    cudaFree(qkv);
    cudaFree(out);
    cudaFree(cu);
    cudaFree(nseq);
    cudaFree(ws);
  }
  return 0;
}
