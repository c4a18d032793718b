// Test fixtures in the published config layouts (tests/fixtures/layouts/): builds a model folder
// from a layout's committed config files, the real tokenizer it names, and seeded random weights
// of the architecture's checkpoint table (the values scripts/gpu/golden_layouts.py writes too),
// and reads the layout's golden (HF transformers / sentence-transformers output).
// Thread-safety: functions are reentrant; folders are per process id.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace petal::testing {

struct LayoutSpec {
  std::string name;           // folder under tests/fixtures/layouts/
  std::string tokenizer_dir;  // relative to the source tree; its tokenizer.json is copied
  std::string append_eos;     // non-empty: rewrite the post-processor to append this token
  std::string dtype;          // "float32" or "bfloat16": how the checkpoint stores tensors
  // Where the layout's folder is, relative to the source tree ("" = tests/fixtures/layouts).
  std::string fixtures_dir;
  // Standard deviation of the seeded weights that are not norm scales (norms: mean 1, std 0.1).
  double weight_std = 0.02;
};

struct GoldenCase {
  std::string text, prompt_name, input;  // input = prompt text + text
  std::vector<int32_t> ids;
  std::vector<float> embedding;
};

struct Golden {
  std::vector<GoldenCase> cases;
  std::map<std::string, double> tensor_sums;
};

std::string SourceDir();
// The layouts of tests/fixtures/layouts/layouts.json, and its weight seed.
StatusOr<std::vector<LayoutSpec>> LoadLayouts(uint64_t* seed);
// golden_<layout_name><suffix>.json from `dir` (default: tests/fixtures/layouts). The suffix
// "_bfloat16" names HF's own bf16 run on the GPU (scripts/gpu/golden_layouts.py --dtype bfloat16).
StatusOr<Golden> LoadGolden(const std::string& layout_name, const std::string& suffix = "",
                            const std::string& dir = "");

// Writes the folder to `out_dir` (created; replaced if present). `config_override`, when not
// empty, is written as config.json instead of the committed one. `sums` receives each written
// tensor's float64 sum of its stored values.
Status BuildLayoutFolder(const LayoutSpec& layout, uint64_t seed, const std::string& out_dir,
                         const std::string& config_override = "",
                         std::map<std::string, double>* sums = nullptr);

// OK iff `written` (BuildLayoutFolder's sums) and a golden's tensor sums name the same tensors
// with the same float64 sums (relative 1e-9): Petal's checkpoint table and the reference's state
// dict agree, and so do the two weight generators. `name` labels the messages.
Status CheckTensorSums(const std::string& name, const std::map<std::string, double>& written,
                       const std::map<std::string, double>& golden);

// A fresh folder name under the temporary directory for this process.
std::string LayoutTempDir(const std::string& name);

double Cosine(const float* a, const float* b, int n);

// What the layout tests (CPU: layouts_test, CUDA: layouts_gpu_test) share.
// The published layouts they run over, and each one's test name (gtest wants no '-').
std::vector<std::string> PublishedLayoutNames();
std::string LayoutTestName(std::string layout_name);
struct BuiltLayout {
  LayoutSpec spec;
  std::string dir;  // the built model folder
  Golden golden;
};
// Layout `name` of layouts.json built into LayoutTempDir(prefix + name), with its golden; `sums`
// as BuildLayoutFolder's.
StatusOr<BuiltLayout> BuildPublishedLayout(const std::string& name, const std::string& prefix = "",
                                           std::map<std::string, double>* sums = nullptr);
// The cosine of each row of `e` to its golden case's embedding (rows in case order); fails when
// the row count or a dimension differs.
StatusOr<std::vector<double>> GoldenCosines(const Embeddings& e, const Golden& golden);

}  // namespace petal::testing
