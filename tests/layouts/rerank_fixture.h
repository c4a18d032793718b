// Ranking-model test fixtures (tests/fixtures/rerank/): the manifest rerank.json (seed, query,
// documents, one entry per fixture with its tokenizer and max_length) and the goldens
// scripts/gpu/golden_rerank.py writes (sentence-transformers CrossEncoder / HF Qwen3ForCausalLM
// logits, ids and token types per pair). Folders are built with layout_fixture.h's writer.
// Thread-safety: functions are reentrant.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "layout_fixture.h"

namespace petal::testing {

struct RerankFixture {
  LayoutSpec spec;  // spec.fixtures_dir = "tests/fixtures/rerank"
  std::string reference;
  int max_length = 0;
};

struct RerankManifest {
  uint64_t seed = 0;
  std::string query;
  std::vector<std::string> documents;
  std::vector<RerankFixture> fixtures;
};

struct RerankCase {
  std::string document;
  std::vector<int32_t> ids, type_ids;
  std::vector<float> logits;
  double score = 0;
};

struct RerankGolden {
  std::vector<RerankCase> cases;
  std::map<std::string, double> tensor_sums;
  int yes_token_id = -1, no_token_id = -1;
};

StatusOr<RerankManifest> LoadRerankManifest();
// golden_<name>.json, or golden_<name>_<suffix>.json when `suffix` is set.
StatusOr<RerankGolden> LoadRerankGolden(const std::string& name, const std::string& suffix = "");

// Builds the fixture's folder (once per process and name) and checks its tensors' sums against
// the golden's; returns the folder.
StatusOr<std::string> BuildRerankFolder(const RerankManifest& m, const RerankFixture& fx,
                                        const RerankGolden& golden);

}  // namespace petal::testing
