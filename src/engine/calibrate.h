// The core of `petal calibrate` (src/cli/cmd_calibrate.cc): runs token sequences through an engine
// built with an Fp8Calibrator as its observer (EngineOptions::observer) in packed batches, and
// turns the calibrator's statistic into Fp8Scales with the model's fingerprint. Separate from the
// command so that the CPU tests can drive it without a tokenizer. Thread-safety: one call at a
// time per engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "model/fp8_scales.h"

namespace petal {

struct CalibrationProgress {
  int batch = 0, batches = 0;     // batches done, of
  int64_t texts = 0, tokens = 0;  // done so far
};

// Packs `seqs` in order into batches of at most `batch_tokens` tokens and `batch_seqs` sequences
// (a longer sequence runs alone), runs each through `engine` (whose observer is `calibrator`),
// calling `progress` after each batch, then fills the statistic, counts and `backend` of the
// result. The fingerprint is the caller's (FingerprintModel). Fails on an empty input, an engine
// error, or a calibrator that saw no tokens or overflowed (Fp8Calibrator::Amax).
StatusOr<Fp8Scales> RunCalibration(Engine* engine, Fp8Calibrator* calibrator,
                                   const std::vector<std::vector<int32_t>>& seqs, int batch_tokens,
                                   int batch_seqs, double percentile,
                                   const std::function<void(const CalibrationProgress&)>& progress);

// A short human-readable table of `s`: per input, the smallest, median and largest amax over the
// layers and the layer holding the largest.
std::string SummarizeScales(const Fp8Scales& s);

}  // namespace petal
