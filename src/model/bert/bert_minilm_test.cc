// Tests of the BERT CPU model on the real all-MiniLM-L6-v2 weights (skipped if
// models/all-MiniLM-L6-v2 has not been fetched): a ragged batch equals each sequence alone, and
// embeddings agree with committed references: tests/fixtures/numpy_ref_*.jsonl (float64 numpy,
// scripts/ref/bert_numpy.py) and, when present, golden_*.json (sentence-transformers,
// scripts/gpu/golden_st.py).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>

#include "common/file_util.h"
#include "kernels/cpu/ops.h"
#include "model/bert/bert.h"
#include "model/bert/bert_arch.h"

namespace petal {
namespace {

const char* kModel = "all-MiniLM-L6-v2";

std::string SourceDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return s ? s : ".";
}

class MiniLmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = JoinPath(JoinPath(SourceDir(), "models"), kModel);
    if (!FileExists(JoinPath(dir, "model.safetensors"))) {
      GTEST_SKIP() << dir << " is missing (scripts/setup.sh fetches it)";
    }
    auto c = LoadModelConfig(dir);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto s = WeightStore::Open(dir);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    auto m = LoadBertCpuModel(*c, *store_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
  }

  // Pooled (and normalised, as the config says) embeddings, [num_seqs, hidden].
  std::vector<float> Embed(const Batch& batch) {
    std::vector<float> hidden;
    Status st = model_->Forward(batch, &hidden);
    EXPECT_TRUE(st.ok()) << st.ToString();
    const ModelConfig& c = model_->config();
    std::vector<float> out(static_cast<size_t>(batch.num_seqs()) * c.hidden_size);
    if (!st.ok()) return out;
    cpu::Pool(hidden.data(), batch.cu_seqlens.data(), batch.num_seqs(), c.hidden_size,
              static_cast<cpu::Pooling>(c.pooling), c.normalize, out.data());
    return out;
  }

  std::unique_ptr<WeightStore> store_;
  std::unique_ptr<CpuModel> model_;
};

struct Agreement {
  double cosine = 1.0;
  double max_abs = 0.0;
};

template <typename A, typename B>
Agreement Compare(const A* a, const B* b, int n) {
  double dot = 0, na = 0, nb = 0, mad = 0;
  for (int i = 0; i < n; ++i) {
    dot += double(a[i]) * double(b[i]);
    na += double(a[i]) * double(a[i]);
    nb += double(b[i]) * double(b[i]);
    mad = std::max(mad, std::abs(double(a[i]) - double(b[i])));
  }
  return {dot / std::sqrt(na * nb), mad};
}

TEST_F(MiniLmTest, RaggedBatchEqualsEachSequenceAlone) {
  const int dim = model_->config().hidden_size;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(1000, 29000);
  std::vector<std::vector<int32_t>> seqs;
  for (int len : {1, 7, 128, 3, 256, 40, 2, 511}) {
    std::vector<int32_t> s(len);
    for (auto& t : s) t = id(rng);
    s.front() = 101;  // [CLS] ... [SEP], as the tokenizer would
    s.back() = 102;
    seqs.push_back(std::move(s));
  }
  const std::vector<float> together = Embed(Batch::FromSequences(seqs));
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::vector<float> alone = Embed(Batch::FromSequences({seqs[i]}));
    Agreement a = Compare(alone.data(), together.data() + i * dim, dim);
    EXPECT_GE(a.cosine, 0.999999) << "sequence " << i << " of length " << seqs[i].size();
    EXPECT_LE(a.max_abs, 1e-5) << "sequence " << i << " of length " << seqs[i].size();
  }
}

// Reads one fixture record ({"ids": [...], "embedding": [...], ...}).
void ReadRecord(simdjson::dom::element rec, const std::string& path,
                std::vector<std::vector<int32_t>>* seqs, std::vector<std::vector<double>>* want) {
  simdjson::dom::array ids, emb;
  ASSERT_EQ(rec["ids"].get_array().get(ids), simdjson::SUCCESS) << path;
  ASSERT_EQ(rec["embedding"].get_array().get(emb), simdjson::SUCCESS) << path;
  seqs->emplace_back();
  for (auto v : ids) seqs->back().push_back(static_cast<int32_t>(int64_t(v)));
  want->emplace_back();
  for (auto v : emb) want->back().push_back(double(v));
}

// Checks every record of a fixture against one ragged batch of all its id sequences. A fixture
// is JSON Lines of records (numpy_ref_*.jsonl) or one object whose "cases" array holds them
// (golden_*.json, written by scripts/gpu/golden_st.py).
void CheckFixture(const std::string& path, double min_cos, double max_abs,
                  const std::function<std::vector<float>(const Batch&)>& embed, int dim) {
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  simdjson::dom::parser parser;
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<double>> want;
  simdjson::dom::array cases;
  if (path.ends_with(".json")) {
    ASSERT_EQ(parser.parse(*text)["cases"].get_array().get(cases), simdjson::SUCCESS) << path;
    for (auto rec : cases) ReadRecord(rec, path, &seqs, &want);
  } else {
    simdjson::dom::document_stream stream;
    ASSERT_EQ(parser.parse_many(*text).get(stream), simdjson::SUCCESS);
    for (auto rec : stream) {
      simdjson::dom::element e;
      ASSERT_EQ(rec.get(e), simdjson::SUCCESS) << path;
      ReadRecord(e, path, &seqs, &want);
    }
  }
  for (const auto& w : want) ASSERT_EQ(static_cast<int>(w.size()), dim) << path;
  ASSERT_FALSE(seqs.empty()) << path;
  const std::vector<float> got = embed(Batch::FromSequences(seqs));
  Agreement worst;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Agreement a = Compare(got.data() + i * dim, want[i].data(), dim);
    EXPECT_GE(a.cosine, min_cos) << path << " record " << i;
    EXPECT_LE(a.max_abs, max_abs) << path << " record " << i;
    worst.cosine = std::min(worst.cosine, a.cosine);
    worst.max_abs = std::max(worst.max_abs, a.max_abs);
  }
  std::printf("%s: %zu records, worst 1 - cosine %.3g, worst max abs diff %.3g\n", path.c_str(),
              seqs.size(), 1.0 - worst.cosine, worst.max_abs);
}

TEST_F(MiniLmTest, MatchesFloat64NumpyReference) {
  const std::string path = SourceDir() + "/tests/fixtures/numpy_ref_" + kModel + ".jsonl";
  ASSERT_TRUE(FileExists(path)) << path;
  // fp32 vs fp64 of the same function: far tighter than the golden tolerance.
  CheckFixture(
      path, 0.9999999, 2e-6, [this](const Batch& b) { return Embed(b); },
      model_->config().hidden_size);
}

TEST_F(MiniLmTest, MatchesSentenceTransformersGolden) {
  const std::string path = SourceDir() + "/tests/fixtures/golden_" + kModel + ".json";
  if (!FileExists(path)) GTEST_SKIP() << path << " not generated yet (scripts/gpu/golden_st.py)";
  CheckFixture(
      path, 0.99999, 1e-4, [this](const Batch& b) { return Embed(b); },
      model_->config().hidden_size);
}

}  // namespace
}  // namespace petal
