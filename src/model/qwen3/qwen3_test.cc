// Qwen3 CPU model tests: reference agreement (HF golden files from the GPU machine, and the fp64
// numpy reference), ragged batching, loader errors, and the attention mask's visible effect.
#include "model/qwen3/qwen3.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include <unistd.h>

#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "model/make_model.h"
#include "model/safetensors_writer.h"
#include "wire/codec.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return s ? s : ".";
}

std::string TempDir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("petal_q3_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

// Reads a JSON array of arrays of numbers found under `key` of the top-level object.
template <typename T>
std::vector<std::vector<T>> ReadNested(const std::string& path, const char* key) {
  std::vector<std::vector<T>> out;
  auto text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return out;
  simdjson::dom::parser parser;
  simdjson::dom::array rows;
  EXPECT_EQ(parser.parse(*text)[key].get_array().get(rows), simdjson::SUCCESS)
      << path << " " << key;
  for (auto row : rows) {
    out.emplace_back();
    for (auto v : row.get_array()) {
      double d = 0;
      if (v.get_double().get(d) != simdjson::SUCCESS) {
        int64_t i = 0;
        EXPECT_EQ(v.get_int64().get(i), simdjson::SUCCESS);
        d = static_cast<double>(i);
      }
      out.back().push_back(static_cast<T>(d));
    }
  }
  return out;
}

// Runs `model_dir` on the ragged batch of `ids` and checks each embedding against `expected`.
void ExpectMatches(const std::string& model_dir, const std::vector<std::vector<int32_t>>& ids,
                   const std::vector<std::vector<float>>& expected, double min_cosine,
                   const std::string& label) {
  auto engine = CpuEngine::Load(model_dir, {.precision = "fp32"});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_EQ(ids.size(), expected.size()) << label;
  auto emb = (*engine)->Embed(Batch::FromSequences(ids));
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  double worst = 1.0;
  for (size_t s = 0; s < ids.size(); ++s) {
    ASSERT_EQ(static_cast<int>(expected[s].size()), emb->dim) << label << " sequence " << s;
    const double cos = wire::CosineSimilarity(emb->row(s), expected[s].data(), emb->dim);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, min_cosine) << label << " sequence " << s << " (length " << ids[s].size() << ")";
  }
  std::printf("[ %s ] %zu sequences, min cosine %.12f (1 - cos = %.2e)\n", label.c_str(),
              ids.size(), worst, 1.0 - worst);
}

const char* kTinyFixtures[] = {"qwen3-tiny-bidir", "qwen3-tiny-causal"};

// (a) Petal CPU against the committed references: HF transformers fp32 on the GPU machine
// (golden_*.json, written by scripts/gpu/golden_qwen3.py) and the fp64 numpy reference
// (ref_numpy_*.json, written by scripts/ref/qwen3_numpy.py). Skipped where a file is absent.
TEST(Qwen3Test, MatchesReferenceEmbeddings) {
  const std::string fixtures = SourceDir() + "/tests/fixtures";
  const std::string inputs = fixtures + "/qwen3_tiny_inputs.json";
  if (!FileExists(inputs)) GTEST_SKIP() << "no " << inputs;
  const auto ids = ReadNested<int32_t>(inputs, "sequences");
  int checked = 0;
  for (const char* name : kTinyFixtures) {
    for (const char* kind : {"golden_", "ref_numpy_"}) {
      const std::string ref = fixtures + "/" + kind + name + ".json";
      if (!FileExists(ref)) continue;
      ExpectMatches(fixtures + "/" + name, ids, ReadNested<float>(ref, "embeddings"), 0.99999,
                    std::string(kind) + name);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no golden_*.json or ref_numpy_*.json under " << fixtures;
}

// The pplx-embed-v1-0.6b shape: PETAL_QWEN3_LARGE_DIR is a checkpoint of `petal make-model --shape
// pplx-embed-v1-0.6b --seed 0` (the same bytes on every machine: its sha256 is in the golden
// file), PETAL_QWEN3_LARGE_GOLDEN a file written by golden_qwen3.py --shape 0.6b (default: the
// committed tests/fixtures/golden_qwen3-0.6b.json).
TEST(Qwen3Test, MatchesLargeGoldenWhenGiven) {
  const char* dir = std::getenv("PETAL_QWEN3_LARGE_DIR");
  if (!dir) GTEST_SKIP() << "set PETAL_QWEN3_LARGE_DIR (and optionally PETAL_QWEN3_LARGE_GOLDEN)";
  const char* env_golden = std::getenv("PETAL_QWEN3_LARGE_GOLDEN");
  const std::string golden =
      env_golden ? env_golden : SourceDir() + "/tests/fixtures/golden_qwen3-0.6b.json";
  ExpectMatches(dir, ReadNested<int32_t>(golden, "sequences"),
                ReadNested<float>(golden, "embeddings"), 0.9999, "large " + golden);
}

class Qwen3ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (AttentionMask m : {AttentionMask::kBidirectional, AttentionMask::kCausal}) {
      MakeModelOptions o;
      o.shape = "qwen3-tiny";
      o.out_dir = TempDir(AttentionMaskName(m));
      o.seed = 11;
      o.mask = m;
      ASSERT_TRUE(MakeModel(o).ok());
      dirs_.push_back(o.out_dir);
    }
  }
  static void TearDownTestSuite() {
    for (const auto& d : dirs_) fs::remove_all(d);
    dirs_.clear();
  }
  static const std::string& Dir(AttentionMask m) {
    return dirs_[m == AttentionMask::kBidirectional ? 0 : 1];
  }
  static std::vector<float> Hidden(const CpuEngine& e,
                                   const std::vector<std::vector<int32_t>>& seqs) {
    std::vector<float> h;
    Status s = e.model().Forward(Batch::FromSequences(seqs), &h);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return h;
  }
  static std::vector<std::string> dirs_;
};
std::vector<std::string> Qwen3ModelTest::dirs_;

// (b) A ragged batch gives each sequence the hidden states it gets alone (positions restart,
// attention stays within each sequence).
TEST_F(Qwen3ModelTest, RaggedBatchEqualsEachAlone) {
  std::vector<std::vector<int32_t>> seqs;
  for (int len : {1, 17, 64, 3, 130, 2}) {
    std::vector<int32_t> s;
    for (int i = 0; i < len; ++i) s.push_back((i * 37 + len * 11) % 1000);
    seqs.push_back(s);
  }
  for (AttentionMask m : {AttentionMask::kBidirectional, AttentionMask::kCausal}) {
    auto e = CpuEngine::Load(Dir(m), {.precision = "fp32"});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const int H = (*e)->config().hidden_size;
    const std::vector<float> all = Hidden(**e, seqs);
    size_t offset = 0;
    for (const auto& s : seqs) {
      const std::vector<float> alone = Hidden(**e, {s});
      ASSERT_EQ(alone.size(), s.size() * H);
      for (size_t i = 0; i < alone.size(); ++i) {
        ASSERT_NEAR(all[offset + i], alone[i], 1e-5) << AttentionMaskName(m) << " len " << s.size();
      }
      offset += alone.size();
    }
  }
}

// (d) Causal: a token's state does not depend on later tokens. Bidirectional: it does.
TEST_F(Qwen3ModelTest, MaskControlsDependenceOnLaterTokens) {
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {5, 6, 700, 800, 900};
  for (AttentionMask m : {AttentionMask::kBidirectional, AttentionMask::kCausal}) {
    auto e = CpuEngine::Load(Dir(m), {.precision = "fp32"});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    const int H = (*e)->config().hidden_size;
    const auto ha = Hidden(**e, {a}), hb = Hidden(**e, {b});
    double first_two = 0, last = 0;
    for (int i = 0; i < 2 * H; ++i)
      first_two = std::max(first_two, double(std::abs(ha[i] - hb[i])));
    for (int i = 4 * H; i < 5 * H; ++i) last = std::max(last, double(std::abs(ha[i] - hb[i])));
    EXPECT_GT(last, 1e-3);  // the differing tokens themselves differ either way
    if (m == AttentionMask::kCausal) {
      EXPECT_EQ(first_two, 0.0) << "causal: tokens 0-1 saw later tokens";
    } else {
      EXPECT_GT(first_two, 1e-4) << "bidirectional: tokens 0-1 ignored later tokens";
    }
  }
}

// Rewrites the checkpoint in `dir` into `out` through `edit`, which may rename, drop or reshape.
void RewriteCheckpoint(const std::string& dir, const std::string& out,
                       const std::function<bool(TensorToWrite*)>& edit,
                       std::vector<TensorToWrite> extra = {}) {
  fs::create_directories(out);
  fs::copy_file(dir + "/config.json", out + "/config.json", fs::copy_options::overwrite_existing);
  auto f = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(f.ok());
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, v] : (*f)->tensors()) {
    TensorToWrite t{name, v.dtype, v.shape, v.data, nullptr};
    if (edit(&t)) tensors.push_back(t);
  }
  for (auto& t : extra) tensors.push_back(t);
  ASSERT_TRUE(WriteSafetensors(out + "/model.safetensors", tensors).ok());
}

StatusOr<std::unique_ptr<CpuModel>> LoadDir(const std::string& dir) {
  PETAL_ASSIGN_OR_RETURN(ModelConfig c, LoadModelConfig(dir));
  PETAL_ASSIGN_OR_RETURN(auto store, WeightStore::Open(dir));
  return LoadCpuModel(c, *store);
}

// (c) A missing or mis-shaped tensor fails at load, naming it.
TEST_F(Qwen3ModelTest, MissingOrMisshapedTensorIsNamed) {
  const std::string src = Dir(AttentionMask::kBidirectional), out = TempDir("edit");
  RewriteCheckpoint(src, out,
                    [](TensorToWrite* t) { return t->name != "layers.1.self_attn.k_norm.weight"; });
  auto missing = LoadDir(out);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("layers.1.self_attn.k_norm.weight"), std::string::npos)
      << missing.status().ToString();

  RewriteCheckpoint(src, out, [](TensorToWrite* t) {
    if (t->name == "layers.0.mlp.up_proj.weight") t->shape = {64, 128};  // transposed
    return true;
  });
  auto misshaped = LoadDir(out);
  ASSERT_FALSE(misshaped.ok());
  EXPECT_NE(misshaped.status().message().find("layers.0.mlp.up_proj.weight"), std::string::npos)
      << misshaped.status().ToString();
  fs::remove_all(out);
}

// The "model."-prefixed spelling (Qwen3ForCausalLM checkpoints, with an LM head) loads unchanged.
TEST_F(Qwen3ModelTest, PrefixedNamesAndLmHeadLoad) {
  const std::string src = Dir(AttentionMask::kCausal), out = TempDir("prefixed");
  const std::vector<float> head(1000 * 64, 0.5f);
  RewriteCheckpoint(src, out,
                    [&](TensorToWrite* t) {
                      t->name = "model." + t->name;
                      return true;
                    },
                    {{"lm_head.weight", DType::kF32, {1000, 64}, head.data(), nullptr}});
  auto plain = LoadDir(src);
  auto prefixed = LoadDir(out);
  ASSERT_TRUE(plain.ok() && prefixed.ok()) << prefixed.status().ToString();
  const Batch batch = Batch::FromSequences({{1, 2, 3, 4}});
  std::vector<float> a, b;
  ASSERT_TRUE((*plain)->Forward(batch, &a).ok());
  ASSERT_TRUE((*prefixed)->Forward(batch, &b).ok());
  EXPECT_EQ(a, b);
  fs::remove_all(out);
}

// The fused layouts the CUDA engine relies on: qkv rows are q | k | v, gate_up rows gate | up.
TEST_F(Qwen3ModelTest, FusedLayoutsAndBias) {
  MakeModelOptions o;
  o.shape = "qwen3-tiny";
  o.out_dir = TempDir("bias");
  o.attention_bias = true;
  ASSERT_TRUE(MakeModel(o).ok());
  auto c = LoadModelConfig(o.out_dir);
  auto store = WeightStore::Open(o.out_dir);
  ASSERT_TRUE(c.ok() && store.ok());
  auto w = LoadQwen3Weights(*c, **store);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(w->attention_bias);
  const auto& L = w->layers[1];
  const int64_t h = 64, q = 128, kv = 64, inter = 128;
  ASSERT_EQ(L.qkv.size(), size_t((q + 2 * kv) * h));
  ASSERT_EQ(L.qkv_bias.size(), size_t(q + 2 * kv));
  const auto k = *(*store)->ReadF32("layers.1.self_attn.k_proj.weight", {kv, h});
  const auto v = *(*store)->ReadF32("layers.1.self_attn.v_proj.bias", {kv});
  const auto up = *(*store)->ReadF32("layers.1.mlp.up_proj.weight", {inter, h});
  EXPECT_TRUE(std::equal(k.begin(), k.end(), L.qkv.begin() + q * h));
  EXPECT_TRUE(std::equal(v.begin(), v.end(), L.qkv_bias.begin() + q + kv));
  EXPECT_TRUE(std::equal(up.begin(), up.end(), L.gate_up.begin() + inter * h));

  // Without the bias tensors, a config that says attention_bias: true fails naming one.
  const std::string out = TempDir("nobias");
  RewriteCheckpoint(o.out_dir, out,
                    [](TensorToWrite* t) { return t->name.find(".bias") == std::string::npos; });
  auto nobias = LoadDir(out);
  ASSERT_FALSE(nobias.ok());
  EXPECT_NE(nobias.status().message().find("layers.0.self_attn.q_proj.bias"), std::string::npos)
      << nobias.status().ToString();
  fs::remove_all(out);
  fs::remove_all(o.out_dir);
}

}  // namespace
}  // namespace petal
