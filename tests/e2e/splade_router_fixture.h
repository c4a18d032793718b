// Test helpers for the bert-splade-router fixture (tests/fixtures/classify/bert-splade-router, an
// inference-free SPLADE Router made by scripts/ref/splade_router_golden.py with SparseEncoder
// itself): the Router folder around the built bert-splade folder (its document transformer), and
// the golden's expected vectors (golden_bert-splade-router.json: encode_query, with and without
// max_active_dims 3, and encode_document's summary). Used by gateway_sparse_router_test and
// cli_embed_query_test. Thread-safety: test-only, single-threaded.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../layouts/layout_fixture.h"
#include "common/file_util.h"
#include "common/status.h"

namespace petal::testing {

namespace fs = std::filesystem;

// The committed Router folder with the built bert-splade folder as its document transformer.
inline StatusOr<std::string> RouterFolder(const std::string& built) {
  const std::string root = LayoutTempDir("bert-splade-router");
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::copy(SourceDir() + "/tests/fixtures/classify/bert-splade-router", root,
           fs::copy_options::recursive, ec);
  if (ec) return Internal("copy the Router fixture: " + ec.message());
  const fs::path doc = fs::path(root) / "document_0_MLMTransformer";
  fs::create_directories(doc, ec);
  for (const auto& e : fs::directory_iterator(built)) {
    const std::string f = e.path().filename().string();
    if (!e.is_regular_file() || f == "modules.json" || f == "config_sentence_transformers.json") {
      continue;
    }
    fs::copy_file(e.path(), doc / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return Internal("copy " + f + ": " + ec.message());
  }
  if (FileExists(built + "/petal_config.json")) {
    fs::copy_file(built + "/petal_config.json", root + "/petal_config.json", ec);
  }
  return root;
}

struct Sparse {
  std::vector<int64_t> indices;
  std::vector<double> values;
};

struct RouterGolden {
  std::vector<std::string> texts;
  std::vector<Sparse> query, query_top3, doc_top;
  std::vector<int64_t> doc_nnz, doc_near_zero;
  std::vector<double> doc_sum;
};

inline Sparse ReadSparse(simdjson::dom::element e) {
  Sparse s;
  for (auto i : e["indices"].get_array()) s.indices.push_back(i.get_int64().value());
  for (auto v : e["values"].get_array()) s.values.push_back(v.get_double().value());
  return s;
}

inline RouterGolden LoadRouterGolden() {
  RouterGolden g;
  simdjson::dom::parser parser;
  auto text = ReadFile(SourceDir() + "/tests/fixtures/classify/golden_bert-splade-router.json");
  EXPECT_TRUE(text.ok());
  if (!text.ok()) return g;
  simdjson::dom::element doc = parser.parse(*text).value();
  for (auto c : doc["cases"].get_array()) {
    g.texts.emplace_back(c["text"].get_string().value());
    g.query.push_back(ReadSparse(c["query"]));
    g.query_top3.push_back(ReadSparse(c["query_top3"]));
    Sparse top;
    for (auto i : c["doc"]["top_index"].get_array()) top.indices.push_back(i.get_int64().value());
    for (auto v : c["doc"]["values"].get_array()) top.values.push_back(v.get_double().value());
    g.doc_top.push_back(top);
    g.doc_nnz.push_back(c["doc"]["nnz"].get_int64().value());
    g.doc_near_zero.push_back(c["doc"]["near_zero"].get_int64().value());
    g.doc_sum.push_back(c["doc"]["sum"].get_double().value());
  }
  return g;
}

}  // namespace petal::testing
