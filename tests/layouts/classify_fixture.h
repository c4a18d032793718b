// Sequence-classifier test fixtures (tests/fixtures/classify/): the manifest classify.json (seed,
// texts, pairs, one entry per fixture with its tokenizer and max_length) and the goldens
// scripts/ref/classify_numpy.py writes (float64 numpy logits and probabilities, ids and token
// types per input). Folders are built with layout_fixture.h's writer (the same seeded weights).
// Thread-safety: functions are reentrant; BuildClassifyFolder caches per process (one thread).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "layout_fixture.h"

namespace petal::testing {

struct ClassifyFixture {
  LayoutSpec spec;  // spec.fixtures_dir = "tests/fixtures/classify"
  int max_length = 0;
};

struct ClassifyManifest {
  uint64_t seed = 0;
  std::vector<std::string> texts;
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<ClassifyFixture> fixtures;
};

struct ClassifyCase {
  std::string text;                          // a single text, or
  std::pair<std::string, std::string> pair;  // a pair (is_pair)
  bool is_pair = false;
  std::vector<int32_t> ids, type_ids;
  std::vector<double> logits, probs;
  // Sparse (SPLADE) fixtures: `logits` holds the 64 largest values, at top_index; nnz counts the
  // reference's non-zero entries (near_zero of them below 1e-5), sum adds all of them.
  std::vector<int32_t> top_index;
  int64_t nnz = 0, near_zero = 0;
  double sum = 0;
};

struct ClassifyGolden {
  std::vector<std::string> labels;
  std::string activation;  // "softmax", "sigmoid", or "splade" (a sparse fixture)
  std::vector<ClassifyCase> cases;
  std::map<std::string, double> tensor_sums;
};

StatusOr<ClassifyManifest> LoadClassifyManifest();
StatusOr<ClassifyGolden> LoadClassifyGolden(const std::string& name);
// Builds the fixture's folder (once per process and name), checks its tensors' sums against the
// golden's and writes petal_config.json with the fixture's max_length; returns the folder.
StatusOr<std::string> BuildClassifyFolder(const ClassifyManifest& m, const ClassifyFixture& fx,
                                          const ClassifyGolden& golden);

}  // namespace petal::testing
