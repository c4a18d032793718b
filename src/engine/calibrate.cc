// petal calibrate's batching loop and summary (calibrate.h).
#include "engine/calibrate.h"

#include <algorithm>
#include <cstdio>

namespace petal {

StatusOr<Fp8Scales> RunCalibration(
    Engine* engine, Fp8Calibrator* calibrator, const std::vector<std::vector<int32_t>>& seqs,
    int batch_tokens, int batch_seqs, double percentile,
    const std::function<void(const CalibrationProgress&)>& progress) {
  if (seqs.empty()) return InvalidArgument("no calibration texts");
  if (batch_tokens <= 0 || batch_seqs <= 0) return InvalidArgument("batch limits must be positive");
  // Batch boundaries first, so progress can say "batch i of n".
  std::vector<size_t> starts;
  int64_t tokens = 0;
  for (size_t i = 0; i < seqs.size();) {
    starts.push_back(i);
    int64_t t = 0;
    int n = 0;
    while (i < seqs.size() && n < batch_seqs &&
           (n == 0 || t + static_cast<int64_t>(seqs[i].size()) <= batch_tokens)) {
      t += static_cast<int64_t>(seqs[i].size());
      ++n;
      ++i;
    }
  }
  starts.push_back(seqs.size());
  CalibrationProgress p;
  p.batches = static_cast<int>(starts.size()) - 1;
  int max_length = 0;
  for (int b = 0; b < p.batches; ++b) {
    Batch batch;
    batch.cu_seqlens.push_back(0);
    for (size_t i = starts[b]; i < starts[b + 1]; ++i) {
      if (seqs[i].empty()) return InvalidArgument("text " + std::to_string(i) + " has no tokens");
      batch.Add(seqs[i]);
      max_length = std::max(max_length, static_cast<int>(seqs[i].size()));
    }
    auto out = engine->Embed(batch);
    if (!out.ok())
      return Status(out.status().code(),
                    "batch " + std::to_string(b + 1) + ": " + out.status().message());
    p.batch = b + 1;
    p.texts += batch.num_seqs();
    p.tokens += batch.num_tokens();
    tokens += batch.num_tokens();
    if (progress) progress(p);
  }
  if (calibrator->rows(0, Fp8Input::kQkv) != tokens)
    return Internal("the engine reported " + std::to_string(calibrator->rows(0, Fp8Input::kQkv)) +
                    " tokens to the calibrator, " + std::to_string(tokens) + " were run");
  Fp8Scales s;
  PETAL_ASSIGN_OR_RETURN(s.amax, calibrator->Amax());
  s.statistic = percentile >= 100.0 ? "max" : "percentile";
  s.percentile = std::min(percentile, 100.0);
  s.backend = engine->backend();
  s.texts = static_cast<int64_t>(seqs.size());
  s.tokens = tokens;
  s.max_length = max_length;
  return s;
}

std::string SummarizeScales(const Fp8Scales& s) {
  const int layers = static_cast<int>(s.amax.size() / kFp8Inputs);
  std::string out = "input        amax min    median      max  (layer of max)\n";
  for (int w = 0; w < kFp8Inputs && layers > 0; ++w) {
    std::vector<float> v;
    int argmax = 0;
    for (int l = 0; l < layers; ++l) {
      v.push_back(s.Amax(l, static_cast<Fp8Input>(w)));
      if (v.back() > v[argmax]) argmax = l;
    }
    std::vector<float> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    char line[160];
    std::snprintf(line, sizeof(line), "%-11s %9.4g %9.4g %9.4g  (%d)\n",
                  Fp8InputName(static_cast<Fp8Input>(w)), sorted.front(), sorted[sorted.size() / 2],
                  sorted.back(), argmax);
    out += line;
  }
  return out;
}

}  // namespace petal
