// Dense layers on the GPU: a cuBLASLt wrapper for out[M,N] = a[M,K] * w[N,K]^T (+ bias) (+ c),
// bf16 operands and output, fp32 accumulation (cpu::Gemm's function, PyTorch Linear layout).
//
// Plans and autotuning: the first call for a problem (M, N, K, epilogue, addend, pointer
// alignments) builds cuBLASLt descriptors, asks the heuristic for up to `max_candidates`
// algorithms and caches the plan. With autotuning on (the default) and the stream NOT capturing,
// it then times every candidate (plus, for small M, split-K variants and our own small-M kernel)
// on the real operands, writing only into a private scratch buffer, and keeps the fastest: this
// synchronises the stream once per plan (a few ms; see docs/kernels.md). While the stream is
// capturing, a missing plan uses the heuristic's first choice (host-only work, no allocation, no
// sync) and is tuned at its next non-capturing call; graphs already captured keep the algorithm
// they captured. Later calls only enqueue cublasLtMatmul (or our kernel) with the workspace
// allocated in Create(), so they can be captured. Call Prepare (or run once eagerly) before
// capturing to get tuned algorithms into graphs.
//
// Thread-safety: a Gemm is NOT thread-safe, and its workspace and scratch must not be used by two
// kernels at once: use one Gemm per stream / engine thread. Do not call Run for a stream that is
// not capturing while the same thread captures another stream (tuning would synchronise).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_params.h"

namespace petal::cuda {

class ChainTimer;  // gemm_chain.h

struct GemmOptions {
  size_t workspace_bytes = 32u << 20;  // cuBLAS's advice for Hopper
  bool autotune = true;                // measure candidates once per plan (see the file comment)
  // Private output buffer for tuning, allocated at the first tuning. Problems with
  // 2*M*N + 512 > this are not tuned unless tune_large_bytes allows them (they then keep the
  // heuristic's first choice, which measured 0-13% slower than the best candidate at M = 4096 -
  // 32768 on an H100).
  size_t tune_scratch_bytes = 64u << 20;
  // Problems whose output is past the scratch but within this many bytes are tuned too, their
  // output going to a buffer allocated for the tuning and freed after it, when the device has
  // twice that plus 1 GiB free (room for engines sharing the GPU; else, or if the allocation
  // fails, the plan stays untuned). 2 GiB covers the 4b gate/up at 32,768 tokens; on an H100
  // tuning these plans took 0.6b 100 x 512 from 955 to 997 emb/s (session 24). 0 = none;
  // PETAL_GEMM_TUNE_LARGE_MB=N overrides.
  size_t tune_large_bytes = size_t{2} << 30;
  int max_candidates = 16;  // heuristic results requested
  int split_k_max_m = 256;  // add split-K variants of the top algorithms for M <= this
  // Also time our own small-M tensor-core kernel (M <= 128; gemm_smallm.h). It is used only where
  // it is faster and its output agrees with cuBLASLt's on the tuning operands.
  bool small_m_kernel = true;
  // Also time our cluster split-K kernel (M <= 512; gemm_cluster.h), under the same rule. Off by
  // default: on the H200 it measured slower than cuBLASLt's best at every model shape
  // (bench/results/2026-12-01-latency/gemm_h200-65b9aa6.txt), so timing it only costs tuning time.
  bool cluster_kernel = false;
  // Also time our TMA + wgmma split-K kernel (M <= 512, sm_90a builds on sm_90; gemm_wgmma.h),
  // under the same rule, when PETAL_GEMM_WGMMA=1 is also in the environment (off by default: on
  // an H100 it measured slower than cuBLASLt at every 0.6b shape,
  // bench/results/2026-12-07-session23).
  bool wgmma_kernel = true;
  // Also time the CUTLASS Hopper kernels (M <= 1024, no bias/GELU; gemm_cutlass.h), under the
  // same rule, where the binary has them and the GPU is sm_90 (PETAL_GEMM_CUTLASS=0 turns off).
  bool cutlass_kernel = true;
  // Per candidate; the median of the timed runs counts. Events resolve ~0.5 us, a fair fraction
  // of a small-M GEMM (3-10 us), hence an odd count larger than the usual 3-5.
  int warmup_runs = 1, timed_runs = 7;
  // Evict L2 (read the scratch) before each timed run: in a model the weights stream from HBM,
  // while back-to-back runs of one GEMM would find them in the 60 MB L2 and misrank small-M algos.
  bool cold_l2 = true;
  // A candidate replaces the heuristic's first choice only if its median is lower by this factor.
  float min_gain = 0.03f;
  // For M <= this, time each candidate as a graph-captured chain of back-to-back launches over
  // copies of its weights spanning `chain_pool_bytes` (gemm_chain.h) instead of lone launches
  // after an L2 eviction: the conditions of a captured forward pass, without the ~5 us of event
  // and ramp-up a lone small-M launch carries. 0 = off (the default); the environment variable
  // PETAL_GEMM_TUNE_CHAIN=M overrides it. Falls back to lone launches if the pool cannot be
  // allocated or the heuristic's first choice cannot be captured.
  int chain_max_m = 0;
  size_t chain_pool_bytes = 128u << 20;
  // Tests only: choose candidate i (in the order heuristic first, heuristic list, split-K
  // variants, our small-M kernel) instead of the fastest, so every candidate can be checked.
  int force_candidate = -1;
};

// Which of our own kernels a plan uses instead of cuBLASLt.
enum class PetalKernel { kNone, kSmallM, kCluster, kCutlass, kWgmma };

// What one plan uses, for logs and benchmarks.
struct GemmPlanInfo {
  int m = 0, n = 0, k = 0;
  bool bias = false, gelu = false, c = false, fp8 = false;
  // "tuned"; "untuned" (heuristic's first choice: autotune off, or planned during capture and not
  // used outside capture since); "too_large" (see tune_scratch_bytes); "failed" (scratch allocation
  // failed).
  std::string state;
  // cuBLASLt's configuration; algo_id -1: our small-M kernel, -2: our cluster kernel (tile_id
  // its configuration, gemm_cluster.h), -3: a CUTLASS kernel (tile_id its configuration,
  // gemm_cutlass.h; split_k 0 = stream-K), -4: our wgmma kernel (tile_id its configuration,
  // gemm_wgmma.h), split_k their K splits.
  int algo_id = -1, tile_id = 0, stages_id = 0, split_k = 1, reduction = 0, swizzle = 0, custom = 0,
      cluster_id = 0;
  int candidates = 0;     // candidates enumerated (0 if not tuned); cuBLASLt may refuse some
  bool chained = false;   // timed as graph-captured chains (GemmOptions::chain_max_m)
  float first_us = 0.f;   // median of the heuristic's first choice while tuning
  float chosen_us = 0.f;  // median of the chosen algorithm while tuning
  // The fastest of our own kernels among the candidates (whether chosen or not), for benchmarks:
  // its median and name ("smallm/s4", "cluster128x64/s8"; empty if none was timed).
  float ours_us = 0.f;
  std::string ours;
  std::string ToString() const;
};

struct GemmStats {
  size_t plans = 0, tuned = 0, untuned = 0, too_large = 0;
  size_t small_m_rejected = 0;  // our kernel was fastest but disagreed with cuBLASLt (a bug)
  double tune_ms = 0;           // wall time spent tuning (host clock, includes the synchronisation)
  std::vector<GemmPlanInfo> per_plan;
  std::string ToString() const;  // one summary line, then one line per plan
};

class Gemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = 32u << 20;

  // Creates the cuBLASLt handle and allocates the workspace on the current device.
  static StatusOr<std::unique_ptr<Gemm>> Create(size_t workspace_bytes = kDefaultWorkspaceBytes);
  static StatusOr<std::unique_ptr<Gemm>> Create(const GemmOptions& options);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Builds and caches the plan for p's problem, tuning it on `stream` when autotuning is on: then
  // a, w, bias and c must be valid device arrays of p's sizes (only read; out is not touched).
  // With autotuning off only the pointers' alignments are used.
  Status Prepare(const GemmParams& p, cudaStream_t stream = nullptr);
  // Enqueues the product on `stream`; plans (and tunes, if not capturing) on first use.
  Status Run(const GemmParams& p, cudaStream_t stream);

  // Switches tuning for plans made (or still pending) from now on; tuned plans stay tuned.
  void set_autotune(bool on) { options_.autotune = on; }
  bool autotune() const { return options_.autotune; }
  size_t num_plans() const { return plans_.size(); }
  GemmStats Stats() const;

 private:
  struct Plan;
  // Everything the algorithm choice depends on. Alignments are in bytes, capped at 256.
  struct Key {
    int m, n, k;
    bool bias, gelu, c, fp8;
    int align_a, align_w, align_c, align_out, align_bias;
    auto operator<=>(const Key&) const = default;
  };

  Gemm() = default;
  Status Validate(const GemmParams& p) const;
  static Key MakeKey(const GemmParams& p);
  StatusOr<Plan*> GetPlan(const Key& key, const GemmParams& p);
  // Heuristic results for the plan's descriptors (at most `count`, first = best guess).
  Status Heuristic(Plan& plan, const Key& key, int count,
                   std::vector<cublasLtMatmulHeuristicResult_t>* out) const;
  Status Enqueue(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmParams& p,
                 cudaStream_t stream) const;
  // Points the plan's descriptor at p's fp8 scale vectors.
  static Status SetScales(const Plan& plan, const GemmParams& p);
  // Tunes `plan` if it is pending, tuning is on and `stream` is not capturing (gemm_tune.cc).
  Status MaybeTune(Plan& plan, const Key& key, const GemmParams& p, cudaStream_t stream);
  Status Tune(Plan& plan, const Key& key, const GemmParams& p, cudaStream_t stream);

  GemmOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<uint8_t> workspace_;
  DeviceBuffer<uint8_t> scratch_;      // tuning output (and L2 eviction), allocated at first tuning
  std::unique_ptr<ChainTimer> chain_;  // weight copies for chained timing, made at first use
  double tune_ms_ = 0;
  size_t small_m_rejected_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace petal::cuda
