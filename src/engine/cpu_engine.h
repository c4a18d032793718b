// CpuEngine: the reference engine (and the default where there is no GPU). Runs a CpuModel in
// fp32, pools and normalises on the host, and returns an already-completed handle.
// Thread-safety: Step() may be called from one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "model/model.h"

namespace petal {

class CpuEngine final : public Engine {
 public:
  // Loads config, weights and the model's CPU implementation from a model folder. With an
  // `observer` (petal calibrate; not owned, must outlive the engine), every Step() reports the
  // fp8 GEMM inputs' per-token maxima to it (model.h, ForwardObserved).
  static StatusOr<std::unique_ptr<CpuEngine>> Load(const std::string& model_dir,
                                                   ActivationObserver* observer = nullptr);

  const ModelConfig& config() const override { return config_; }
  std::string backend() const override { return "cpu"; }
  StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) override;
  const CpuModel& model() const { return *model_; }

 private:
  CpuEngine() = default;
  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<CpuModel> model_;
  ActivationObserver* observer_ = nullptr;
};

}  // namespace petal
