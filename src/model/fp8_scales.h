// Static fp8 activation scales (`petal calibrate`, `--fp8-scales DIR`): the calibrated absolute
// maximum of every fp8 GEMM input of every layer (activation_observer.h), the file that holds it
// (DIR/fp8_scales.json, versioned, with the fingerprint of the model it was measured on) and the
// collector that computes it from a forward pass's per-token maxima. The format is in
// docs/kernels.md ("FP8", static scales). Thread-safety: value types and pure functions;
// Fp8Calibrator is driven by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/activation_observer.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace petal {

inline constexpr const char* kFp8ScalesFile = "fp8_scales.json";
inline constexpr int kFp8ScalesVersion = 1;

// What identifies the model a scales file belongs to: the shapes (readable in messages) and three
// FNV-1a 64 hashes: of the architecture-relevant config fields, of every checkpoint tensor's name,
// dtype and shape, and of the first 4 KiB of every tensor's bytes (so a fine-tune of the same
// shape does not match).
struct ModelFingerprint {
  std::string architecture;
  int num_layers = 0, hidden_size = 0, intermediate_size = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  std::string config_hash, tensors_hash, weights_hash;  // 16 hex digits each
};
ModelFingerprint FingerprintModel(const ModelConfig& config, const WeightStore& store);
// "" when `a` and `b` name the same model; otherwise the first difference, e.g.
// "num_layers 28 (file) vs 36 (model)".
std::string DescribeMismatch(const ModelFingerprint& file, const ModelFingerprint& model);

struct Fp8Scales {
  ModelFingerprint model;
  // How amax was taken over the calibration tokens: "max" (the largest per-token maximum) or
  // "percentile" (the `percentile`-th percentile, nearest rank, of the per-token maxima).
  std::string statistic = "max";
  double percentile = 100.0;
  std::string backend;  // engine that ran the calibration: "cpu" (fp32) or "cuda" (bf16)
  int64_t texts = 0, tokens = 0;
  int max_length = 0;  // the longest calibration sequence in tokens (after truncation)
  // [num_layers * kFp8Inputs]: layer-major, Fp8Input order.
  std::vector<float> amax;
  float Amax(int layer, Fp8Input which) const {
    return amax[static_cast<size_t>(layer) * kFp8Inputs + static_cast<int>(which)];
  }
  // The dequantisation scales the fp8 kernels use, amax / 448 (e4m3's largest finite value),
  // with all-zero tensors floored as the dynamic path does (fp8_ops.h): [num_layers * 4].
  std::vector<float> DequantScales() const;
};

// Collects per-token maxima from forward passes (an ActivationObserver) and reduces them to
// Fp8Scales::amax. With percentile >= 100 only the running maximum is kept; below it, every
// per-token value (4 bytes per token, layer and input).
class Fp8Calibrator final : public ActivationObserver {
 public:
  Fp8Calibrator(int num_layers, double percentile);
  void ObserveRowAmax(int layer, Fp8Input which, const float* row_amax, int rows) override;
  // Tokens seen by each (layer, input); all equal after whole forward passes.
  int64_t rows(int layer, Fp8Input which) const { return count_[Index(layer, which)]; }
  // The statistic per (layer, input); fails if any was never observed or saw a non-finite value.
  StatusOr<std::vector<float>> Amax() const;

 private:
  size_t Index(int layer, Fp8Input which) const {
    return static_cast<size_t>(layer) * kFp8Inputs + static_cast<int>(which);
  }
  int num_layers_;
  double percentile_;
  std::vector<float> max_;
  std::vector<int64_t> count_;
  std::vector<int64_t> non_finite_;
  std::vector<std::vector<float>> values_;  // percentile < 100 only
};

// Writes `scales` to dir/fp8_scales.json (creating dir), replacing any previous file.
Status WriteFp8Scales(const std::string& dir, const Fp8Scales& scales);
// Parses a scales file's JSON text; `label` names it in errors.
StatusOr<Fp8Scales> ParseFp8Scales(const std::string& json, const std::string& label);
// Reads dir/fp8_scales.json and checks it was calibrated on this model (fingerprint and layer
// count): a file from another model is refused with the file's path and the difference.
StatusOr<Fp8Scales> LoadFp8ScalesFor(const std::string& dir, const ModelConfig& config,
                                     const WeightStore& store);

}  // namespace petal
