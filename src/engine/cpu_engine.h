// CpuEngine: the engine where there is no GPU. Runs a CpuModel, pools and normalises on the host,
// and returns an already-completed handle. Two forwards: the fp32 reference (bert.cc, qwen3.cc;
// OpenBLAS) and the fast path (model/cpu_fast.h; oneDNN GEMMs in fp32, bf16 or int8, blocked
// attention, fused passes), chosen by CpuEngineOptions::precision and the CPU's features at run
// time. Thread-safety: Step() may be called from one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/cpu_precision_gate.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/multivector.h"

namespace petal {

struct CpuEngineOptions {
  // "auto" (fast bf16 where the CPU has avx512_bf16 / AMX-BF16 and the model passes the start-up
  // fidelity gate (cpu_precision_gate.h), else fast fp32 where the CPU has AVX2, else the
  // reference), "fp32", "int8", "bf16" (FailedPrecondition on a CPU without bf16), or
  // "reference" (the fp32 reference forward; also what "generic" CPUs get).
  std::string precision = "auto";
  // "auto": the gate's threshold on the worst cosine against the fp32 reference.
  double bf16_min_cosine = kCpuGateMinCosine;
  int threads = 0;  // OpenMP threads; 0: OMP_NUM_THREADS, else the CPUs this process may use
};

class CpuEngine final : public Engine {
 public:
  // Loads config, weights and the model's CPU implementation from a model folder. With an
  // `observer` (petal calibrate; not owned, must outlive the engine), every Step() reports the
  // fp8 GEMM inputs' per-token maxima to it (model.h, ForwardObserved); it runs the fp32
  // reference path whatever options.precision says.
  static StatusOr<std::unique_ptr<CpuEngine>> Load(const std::string& model_dir,
                                                   const CpuEngineOptions& options = {},
                                                   ActivationObserver* observer = nullptr);

  const ModelConfig& config() const override { return config_; }
  std::string backend() const override { return "cpu"; }
  // "cpu path: fast fp32 (oneDNN ...); threads: ...; cpu: <features>".
  std::string Describe() const override { return describe_; }
  StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) override;
  const CpuModel& model() const { return *model_; }
  // The forward in use: "reference", "fp32", "int8" or "bf16".
  const std::string& path() const { return path_; }
  // The "auto" bf16 gate's result (sequences == 0 if it did not run).
  const CpuGateResult& gate() const { return gate_; }

 private:
  CpuEngine() = default;
  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<CpuModel> model_;
  // Multi-vector models: the Dense projection applied to every token (model/multivector.h).
  std::optional<TokenProjection> projection_;
  ActivationObserver* observer_ = nullptr;
  std::string path_, describe_;
  CpuGateResult gate_;
  int threads_ = 1;
};

}  // namespace petal
