// petal_gemm_bench: the dense layers of our models (MiniLM, Qwen3 0.6B and 4B) through Gemm, with
// the heuristic's first choice (autotune off) and with the tuned choice, at M from 1 to 32768
// tokens; then all 112 GEMMs of the 0.6B model (28 layers, distinct weights) in one CUDA graph at
// M = 128 and 512, untuned vs tuned. Prints tables and writes JSON (--out). Timings: median of
// --iters event-timed runs after a warm-up (which tunes); single GEMMs run with the L2 evicted
// before each run (--hot keeps it warm), as weights stream from HBM inside a model.
// Not a test: run by hand on the GPU machine. Single-threaded.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_flush.h"

namespace petal::cuda {
namespace {

using bf16 = __nv_bfloat16;

#define BENCH_CHECK(expr)                                                             \
  do {                                                                                \
    if (const Status s_ = (expr); !s_.ok()) {                                         \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.ToString().c_str()); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define BENCH_CUDA(expr)                                                                          \
  do {                                                                                            \
    if (const cudaError_t e_ = (expr); e_ != cudaSuccess) {                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

enum class Addend { kNone, kInPlace, kSeparate };  // c: none, c == out (residual), c != out

struct Layer {
  const char* model;
  const char* name;
  int n, k;
  bool bias;
  Addend c;
};

// Epilogues as the engine runs them: Qwen3 has no biases and adds the residual in place in O and
// down; BERT adds biases everywhere and writes O / down + residual to a separate buffer.
constexpr Layer kLayers[] = {
    {"minilm", "qkv", 1152, 384, true, Addend::kNone},
    {"minilm", "o", 384, 384, true, Addend::kSeparate},
    {"minilm", "up", 1536, 384, true, Addend::kNone},
    {"minilm", "down", 384, 1536, true, Addend::kSeparate},
    {"0.6b", "qkv", 4096, 1024, false, Addend::kNone},
    {"0.6b", "o", 1024, 2048, false, Addend::kInPlace},
    {"0.6b", "gate_up", 6144, 1024, false, Addend::kNone},
    {"0.6b", "down", 1024, 3072, false, Addend::kInPlace},
    {"4b", "qkv", 6144, 2560, false, Addend::kNone},
    {"4b", "o", 2560, 4096, false, Addend::kInPlace},
    {"4b", "gate_up", 19456, 2560, false, Addend::kNone},
    {"4b", "down", 2560, 9728, false, Addend::kInPlace},
};

struct Args {
  std::string out, models = "minilm,0.6b,4b";
  std::vector<int> ms = {1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 16384, 32768};
  std::vector<int> graph_ms = {128, 512};
  int iters = 20;
  size_t scratch_mb = 64;
  bool hot = false;
};

std::vector<int> ParseInts(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (f == "--out")
      a.out = v, ++i;
    else if (f == "--models")
      a.models = v, ++i;
    else if (f == "--ms")
      a.ms = ParseInts(v), ++i;
    else if (f == "--graph-ms")
      a.graph_ms = ParseInts(v), ++i;
    else if (f == "--iters")
      a.iters = std::max(1, std::atoi(v)), ++i;
    else if (f == "--scratch-mb")
      a.scratch_mb = std::strtoull(v, nullptr, 10), ++i;
    else if (f == "--hot")
      a.hot = true;
    else {
      std::fprintf(stderr,
                   "usage: petal_gemm_bench [--out f.json] [--models minilm,0.6b,4b] [--ms 1,16,..]"
                   " [--graph-ms 128,512] [--iters 20] [--scratch-mb 64] [--hot]\n");
      std::exit(2);
    }
  }
  return a;
}

// Fills `bytes` of device memory with uniform bf16 values in [-scale, scale], repeating one random
// host block (random rather than constant data: power draw, hence clocks, depends on it).
void FillRandom(void* dst, size_t bytes, float scale, uint32_t seed) {
  constexpr size_t kBlock = 4u << 20;  // elements
  std::vector<uint16_t> block(kBlock);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& b : block) {
    const float f = u(rng);
    uint32_t x;
    std::memcpy(&x, &f, 4);
    b = static_cast<uint16_t>(x >> 16);  // truncation: any bf16 near f will do
  }
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t off = 0; off < bytes; off += kBlock * 2)
    BENCH_CUDA(cudaMemcpy(d + off, block.data(), std::min(kBlock * 2, bytes - off),
                          cudaMemcpyHostToDevice));
}

struct Timer {
  std::vector<cudaEvent_t> ev;
  explicit Timer(int n) : ev(2 * n) {
    for (auto& e : ev) cudaEventCreate(&e);
  }
  ~Timer() {
    for (auto e : ev) cudaEventDestroy(e);
  }
  // Median microseconds of the recorded pairs (after a stream sync).
  double MedianUs() {
    std::vector<float> ms(ev.size() / 2);
    for (size_t i = 0; i < ms.size(); ++i) cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]);
    std::sort(ms.begin(), ms.end());
    return 1000.0 * ms[ms.size() / 2];
  }
};

struct Buffers {
  DeviceBuffer<bf16> a, w, c, out;
  DeviceBuffer<uint8_t> flush;
};

// Median us of one GEMM; warm-up first (this is where a tuned Gemm measures its candidates).
double TimeGemm(Gemm& g, const GemmParams& p, const Args& args, Buffers& b, cudaStream_t st) {
  BENCH_CHECK(g.Run(p, st));
  BENCH_CHECK(g.Run(p, st));
  Timer t(args.iters);
  for (int i = 0; i < args.iters; ++i) {
    if (!args.hot)
      BENCH_CHECK(LaunchL2Flush(b.flush.get(), b.flush.bytes(),
                                reinterpret_cast<uint32_t*>(b.flush.get()), st));
    BENCH_CUDA(cudaEventRecord(t.ev[2 * i], st));
    BENCH_CHECK(g.Run(p, st));
    BENCH_CUDA(cudaEventRecord(t.ev[2 * i + 1], st));
  }
  BENCH_CUDA(cudaStreamSynchronize(st));
  return t.MedianUs();
}

GemmPlanInfo FindPlan(const Gemm& g, const GemmParams& p) {
  for (const GemmPlanInfo& i : g.Stats().per_plan)
    if (i.m == p.m && i.n == p.n && i.k == p.k && i.bias == (p.bias != nullptr) &&
        i.c == (p.c != nullptr))
      return i;
  return {};
}

std::string AlgoStr(const GemmPlanInfo& i) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "id%d/t%d/s%d/k%d/r%d/c%d/cl%d", i.algo_id, i.tile_id,
                i.stages_id, i.split_k, i.reduction, i.custom, i.cluster_id);
  return buf;
}

std::string Json(const char* k, const std::string& v) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "\"%s\": \"%s\"", k, v.c_str());
  return buf;
}
std::string Json(const char* k, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "\"%s\": %.4g", k, v);
  return buf;
}

// {"k": v, ...} from Json() fields (appending, not operator+: GCC 12 warns falsely on the latter).
std::string Obj(std::initializer_list<std::string> fields) {
  std::string s = "{";
  for (const std::string& f : fields) {
    if (s.size() > 1) s += ", ";
    s += f;
  }
  s += "}";
  return s;
}

// One row per (layer, M): heuristic-first vs tuned. Appends JSON objects to `rows`.
void ShapeBench(const Args& args, Gemm& first, Gemm& tuned, Buffers& b, cudaStream_t st,
                std::vector<std::string>* rows) {
  std::printf("%-7s %-8s %6s %6s %6s %10s %10s %6s %8s %8s %8s  %-10s %-28s %s\n", "model", "layer",
              "M", "N", "K", "first_us", "tuned_us", "gain", "TFLOP/s", "GB/s", "tune_ms", "state",
              "algo(id/tile/stages/splitk/red/custom/cluster)", "best_of_ours us");
  const int max_m = *std::max_element(args.ms.begin(), args.ms.end());
  for (const char* model : {"minilm", "0.6b", "4b"}) {
    if (args.models.find(model) == std::string::npos) continue;
    int max_n = 0, max_k = 0;
    for (const Layer& l : kLayers)
      if (std::strcmp(l.model, model) == 0)
        max_n = std::max(max_n, l.n), max_k = std::max(max_k, l.k);
    const size_t mk = size_t(max_m) * max_k, mn = size_t(max_m) * max_n;
    BENCH_CHECK(b.a.Allocate(mk));
    BENCH_CHECK(b.c.Allocate(mn));
    BENCH_CHECK(b.out.Allocate(mn));
    BENCH_CHECK(b.w.Allocate(size_t(max_n) * max_k + max_n));  // weights, then the bias
    FillRandom(b.a.get(), b.a.bytes(), 1.f, 1);
    FillRandom(b.c.get(), b.c.bytes(), 1.f, 2);
    FillRandom(b.out.get(), b.out.bytes(), 1.f, 3);
    for (const Layer& l : kLayers) {
      if (std::strcmp(l.model, model) != 0) continue;
      FillRandom(b.w.get(), b.w.bytes(), 1.f / std::sqrt(float(l.k)), 4);
      for (int m : args.ms) {
        GemmParams p;
        p.a = b.a.get(), p.w = b.w.get(), p.out = b.out.get(), p.m = m, p.n = l.n, p.k = l.k;
        p.bias = l.bias ? b.w.get() + size_t(l.n) * l.k : nullptr;
        p.c = l.c == Addend::kInPlace    ? b.out.get()
              : l.c == Addend::kSeparate ? b.c.get()
                                         : nullptr;
        const double first_us = TimeGemm(first, p, args, b, st);
        const double tune0 = tuned.Stats().tune_ms;
        const double tuned_us = TimeGemm(tuned, p, args, b, st);
        const double tune_ms = tuned.Stats().tune_ms - tune0;
        const GemmPlanInfo info = FindPlan(tuned, p);
        const double flops = 2.0 * m * l.n * l.k;
        const double bytes =
            2.0 * (double(m) * l.k + double(l.n) * l.k + double(m) * l.n * (p.c ? 2 : 1));
        std::printf(
            "%-7s %-8s %6d %6d %6d %10.2f %10.2f %6.3f %8.1f %8.0f %8.2f  %-10s %-28s %s %.2f\n",
            model, l.name, m, l.n, l.k, first_us, tuned_us, first_us / tuned_us,
            flops / tuned_us / 1e6, bytes / tuned_us / 1e3, tune_ms, info.state.c_str(),
            AlgoStr(info).c_str(), info.ours.empty() ? "-" : info.ours.c_str(), info.ours_us);
        std::fflush(stdout);
        rows->push_back(
            Obj({Json("model", model), Json("layer", l.name), Json("m", m), Json("n", l.n),
                 Json("k", l.k), Json("bias", l.bias), Json("addend", int(l.c)),
                 Json("first_us", first_us), Json("tuned_us", tuned_us),
                 Json("tflops", flops / tuned_us / 1e6), Json("gbps", bytes / tuned_us / 1e3),
                 Json("tune_ms", tune_ms), Json("state", info.state), Json("algo", AlgoStr(info)),
                 Json("candidates", info.candidates), Json("ours", info.ours),
                 Json("ours_us", info.ours_us)}));
      }
    }
  }
}

// All 112 GEMMs of the 0.6B model (28 layers, distinct weights: 0.88 GB) at M tokens in one
// CUDA graph, as the engine runs them: QKV, O (+residual in place), gate_up, down (+residual).
void GraphBench(const Args& args, Gemm& first, Gemm& tuned, cudaStream_t st,
                std::vector<std::string>* rows) {
  constexpr int kLayersN = 28, H = 1024, Q = 2048, QKV = 4096, I = 3072;
  const size_t per_layer = size_t(QKV) * H + size_t(H) * Q + size_t(2 * I) * H + size_t(H) * I;
  DeviceBuffer<bf16> w, x, qkv, attn, r, gu, act;
  BENCH_CHECK(w.Allocate(per_layer * kLayersN));
  FillRandom(w.get(), w.bytes(), 0.03f, 5);
  const double weight_bytes = double(w.bytes());
  for (int m : args.graph_ms) {
    BENCH_CHECK(x.Allocate(size_t(m) * H));
    BENCH_CHECK(qkv.Allocate(size_t(m) * QKV));
    BENCH_CHECK(attn.Allocate(size_t(m) * Q));
    BENCH_CHECK(r.Allocate(size_t(m) * H));
    BENCH_CHECK(gu.Allocate(size_t(m) * 2 * I));
    BENCH_CHECK(act.Allocate(size_t(m) * I));
    for (auto* buf : {&x, &attn, &r, &act}) FillRandom(buf->get(), buf->bytes(), 1.f, 6);
    for (Gemm* g : {&first, &tuned}) {
      auto forward = [&]() {
        for (int l = 0; l < kLayersN; ++l) {
          const bf16* wl = w.get() + per_layer * l;
          const bf16 *w_qkv = wl, *w_o = w_qkv + size_t(QKV) * H, *w_gu = w_o + size_t(H) * Q,
                     *w_down = w_gu + size_t(2 * I) * H;
          BENCH_CHECK(g->Run({x.get(), w_qkv, nullptr, nullptr, qkv.get(), m, QKV, H}, st));
          BENCH_CHECK(g->Run({attn.get(), w_o, nullptr, r.get(), r.get(), m, H, Q}, st));
          BENCH_CHECK(g->Run({x.get(), w_gu, nullptr, nullptr, gu.get(), m, 2 * I, H}, st));
          BENCH_CHECK(g->Run({act.get(), w_down, nullptr, r.get(), r.get(), m, H, I}, st));
        }
      };
      const double tune0 = g->Stats().tune_ms;
      forward();  // eager: plans, and tunes the four shapes
      BENCH_CUDA(cudaStreamSynchronize(st));
      const double tune_ms = g->Stats().tune_ms - tune0;
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      BENCH_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      forward();
      BENCH_CUDA(cudaStreamEndCapture(st, &graph));
      BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (int i = 0; i < 3; ++i) BENCH_CUDA(cudaGraphLaunch(exec, st));
      Timer t(args.iters);
      for (int i = 0; i < args.iters; ++i) {
        BENCH_CUDA(cudaEventRecord(t.ev[2 * i], st));
        BENCH_CUDA(cudaGraphLaunch(exec, st));
        BENCH_CUDA(cudaEventRecord(t.ev[2 * i + 1], st));
      }
      BENCH_CUDA(cudaStreamSynchronize(st));
      const double us = t.MedianUs();
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      const double flops = 2.0 * m * double(per_layer) * kLayersN;
      const char* kind = g == &first ? "heuristic_first" : "tuned";
      std::printf(
          "0.6b all-112-GEMM graph M=%-5d %-15s %8.1f us  %6.1f TFLOP/s  weights %.0f GB/s"
          "  (floor at 4.3 TB/s: %.0f us)  tune %.1f ms\n",
          m, kind, us, flops / us / 1e6, weight_bytes / us / 1e3, weight_bytes / 4.3e6, tune_ms);
      rows->push_back(
          Obj({Json("m", m), Json("kind", kind), Json("us", us), Json("tflops", flops / us / 1e6),
               Json("weight_gbps", weight_bytes / us / 1e3), Json("tune_ms", tune_ms)}));
    }
  }
}

std::string JoinRows(const std::vector<std::string>& rows) {
  std::string s;
  for (size_t i = 0; i < rows.size(); ++i) {
    s += i ? ",\n    " : "\n    ";
    s += rows[i];
  }
  return s;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB; iters %d, L2 %s between single-GEMM runs\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, args.iters,
              args.hot ? "kept warm" : "evicted");
  GemmOptions fo;
  fo.autotune = false;
  GemmOptions to;
  to.tune_scratch_bytes = args.scratch_mb << 20;
  StatusOr<std::unique_ptr<Gemm>> first = Gemm::Create(fo), tuned = Gemm::Create(to);
  BENCH_CHECK(first.status());
  BENCH_CHECK(tuned.status());
  cudaStream_t st;
  BENCH_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Buffers b;
  BENCH_CHECK(b.flush.Allocate(2 * size_t(prop.l2CacheSize)));
  std::vector<std::string> gemm_rows, graph_rows;
  ShapeBench(args, **first, **tuned, b, st, &gemm_rows);
  b = Buffers{};  // free before the graph's 0.9 GB of weights
  if (args.models.find("0.6b") != std::string::npos)
    GraphBench(args, **first, **tuned, st, &graph_rows);
  const GemmStats stats = (*tuned)->Stats();
  std::printf("%s\n", stats.ToString().c_str());
  if (!args.out.empty()) {
    FILE* f = std::fopen(args.out.c_str(), "w");
    if (!f) return std::perror(args.out.c_str()), 1;
    std::fprintf(f,
                 "{\n  %s,\n  %s,\n  %s,\n  \"gemms\": [%s\n  ],\n  \"graph_0_6b\": [%s\n  ],\n"
                 "  \"tuned_plans\": %zu,\n  \"tune_ms_total\": %.1f\n}\n",
                 Json("device", prop.name).c_str(), Json("iters", args.iters).c_str(),
                 Json("l2", args.hot ? "warm" : "evicted").c_str(), JoinRows(gemm_rows).c_str(),
                 JoinRows(graph_rows).c_str(), stats.tuned, stats.tune_ms);
    std::fclose(f);
    std::printf("wrote %s\n", args.out.c_str());
  }
  cudaStreamDestroy(st);
  return 0;
}

}  // namespace petal::cuda

int main(int argc, char** argv) { return petal::cuda::BenchMain(argc, argv); }
