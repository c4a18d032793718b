// `petal embed --prompt-name query` on an inference-free SPLADE model (the bert-splade-router
// fixture, splade_router_fixture.h; its golden came from sentence-transformers' SparseEncoder):
// each input's line is encode_query's vector (the same index set, values within 1e-6), also with
// --max-active-dims 3, from JSON Lines on stdin and from TEXT arguments, with no engine (the query
// route runs even when the document transformer's weights are gone); without the flag the inputs
// are documents, embedded by the CPU engine (fp32) as encode_document (sums within 1e-5);
// --dimensions and out-of-vocabulary --ids are refused, naming the input.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../layouts/classify_fixture.h"
#include "shell_util.h"
#include "splade_router_fixture.h"

namespace petal::testing {
namespace {

// `s` as a JSON string (the golden's texts: quotes, backslashes and UTF-8, no control bytes).
std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// One Sparse per output line ({"indices": [...], "values": [...]}).
std::vector<Sparse> ParseLines(const std::string& out) {
  std::vector<Sparse> rows;
  simdjson::dom::parser parser;
  size_t start = 0;
  while (start < out.size()) {
    const size_t nl = out.find('\n', start);
    const std::string line = out.substr(start, nl - start);
    start = nl == std::string::npos ? out.size() : nl + 1;
    simdjson::dom::element e;
    EXPECT_FALSE(parser.parse(line).get(e)) << line;
    rows.push_back(ReadSparse(e));
  }
  return rows;
}

void ExpectRows(const std::vector<Sparse>& got, const std::vector<Sparse>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].indices, want[i].indices) << what << " text " << i;
    ASSERT_EQ(got[i].values.size(), want[i].values.size()) << what << " text " << i;
    for (size_t k = 0; k < got[i].values.size(); ++k) {
      EXPECT_NEAR(got[i].values[k], want[i].values[k], tol) << what << " text " << i;
    }
  }
}

// The Router folder around the built bert-splade folder; "" if the fixture is unavailable.
std::string BuildRouter() {
  auto m = LoadClassifyManifest();
  auto g = LoadClassifyGolden("bert-splade");
  if (!m.ok() || !g.ok()) return "";
  for (const auto& f : m->fixtures) {
    if (f.spec.name != "bert-splade") continue;
    auto dir = BuildClassifyFolder(*m, f, *g);
    if (!dir.ok() || !FileExists(*dir + "/tokenizer.json")) return "";
    auto router = RouterFolder(*dir);
    return router.ok() ? *router : "";
  }
  return "";
}

TEST(CliEmbedQuery, QueriesAreEncodeQuerysVectors) {
  const std::string dir = BuildRouter();
  if (dir.empty()) GTEST_SKIP() << "fixture or tokenizer unavailable";
  const RouterGolden g = LoadRouterGolden();
  ASSERT_FALSE(g.texts.empty());
  const std::string input = dir + "/query_texts.jsonl";
  {
    std::ofstream f(input);
    for (const auto& t : g.texts) f << Quote(t) << "\n";
  }
  const std::string embed = std::string(PETAL_BIN) + " embed --model " + dir;
  const std::string cpu = " --backend cpu --cpu-precision fp32";
  std::string out;
  ASSERT_EQ(RunShell(embed + " --prompt-name query < " + input, &out), 0) << out;
  ExpectRows(ParseLines(out), g.query, 1e-6, "stdin");
  ASSERT_EQ(RunShell(embed + " --prompt-name query --max-active-dims 3 < " + input, &out), 0);
  ExpectRows(ParseLines(out), g.query_top3, 1e-6, "--max-active-dims 3");
  ASSERT_EQ(g.texts[2], "It is a chair.");
  ASSERT_EQ(RunShell(embed + " --prompt-name query 'It is a chair.'", &out), 0) << out;
  ExpectRows(ParseLines(out), {g.query[2]}, 1e-6, "TEXT argument");

  // Documents (the default, or --prompt-name document): the engine, as encode_document.
  for (const char* flag : {"", " --prompt-name document"}) {
    ASSERT_EQ(RunShell(embed + cpu + flag + " < " + input, &out), 0) << flag;
    const auto docs = ParseLines(out);
    ASSERT_EQ(docs.size(), g.texts.size()) << flag;
    for (size_t i = 0; i < docs.size(); ++i) {
      std::map<int64_t, double> entries;
      double sum = 0;
      for (size_t e = 0; e < docs[i].indices.size(); ++e) {
        entries[docs[i].indices[e]] = docs[i].values[e];
        sum += docs[i].values[e];
      }
      EXPECT_NEAR(sum, g.doc_sum[i], 1e-5 * std::abs(g.doc_sum[i])) << flag << " " << i;
      for (size_t t = 0; t < g.doc_top[i].indices.size(); ++t) {
        EXPECT_NEAR(entries[g.doc_top[i].indices[t]], g.doc_top[i].values[t], 1e-5) << i;
      }
    }
  }

  // Queries need no engine: they still run with the document transformer's weights gone.
  std::filesystem::remove(dir + "/document_0_MLMTransformer/model.safetensors");
  ASSERT_EQ(RunShell(embed + " --prompt-name query < " + input, &out), 0) << out;
  ExpectRows(ParseLines(out), g.query, 1e-6, "no document weights");
}

TEST(CliEmbedQuery, QueryErrorsNameTheInput) {
  const std::string dir = BuildRouter();
  if (dir.empty()) GTEST_SKIP() << "fixture or tokenizer unavailable";
  const std::string embed =
      std::string(PETAL_BIN) + " embed --model " + dir + " --prompt-name query";
  std::string out;
  EXPECT_EQ(RunShell(embed + " --dimensions 8 hello 2>&1", &out), 1);
  EXPECT_NE(out.find("--dimensions does not apply to sparse (SPLADE) models"), std::string::npos)
      << out;
  // A bad line answers null (line N still answers input N) and the run exits 1.
  EXPECT_EQ(RunShell("printf '\"chair\"\\n[1,2]\\n\"\"\\n' | " + embed + " 2>&1", &out), 1);
  EXPECT_NE(out.find("line 2: expected a JSON string"), std::string::npos) << out;
  EXPECT_NE(out.find("line 3: empty text"), std::string::npos) << out;
  EXPECT_EQ(RunShell(embed + " --ids '[1,2,99999999]' 2>&1", &out), 1);
  EXPECT_NE(out.find("text 1: token id 99999999 is outside the vocabulary"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace petal::testing
