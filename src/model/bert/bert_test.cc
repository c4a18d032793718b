// Tests of the BERT CPU model on a tiny hand-written checkpoint: tensor-name table and aliases,
// load errors that name the tensor, fused QKV layout, forward against a naive reference. Tests on
// real weights are in bert_minilm_test.cc.
#include "model/bert/bert.h"
#include "model/bert/bert_arch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "common/file_util.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

// Writes a safetensors file from named fp32 tensors, for checkpoints crafted in the test.
class TinyCheckpoint {
 public:
  void Add(const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, 0.5f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    tensors_[name] = {std::move(shape), std::move(v)};
  }
  void Remove(const std::string& name) { tensors_.erase(name); }
  void Reshape(const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    Remove(name);
    Add(name, std::move(shape), seed);
  }
  // Writes F32 tensors, or BF16 (rounded to nearest even) if `bf16`.
  void Write(const std::string& path, bool bf16 = false) const {
    std::string header = "{", data;
    for (const auto& [name, t] : tensors_) {
      std::string shape;
      for (int64_t d : t.first) {
        if (!shape.empty()) shape += ',';
        shape += std::to_string(d);
      }
      const size_t begin = data.size();
      for (float f : t.second) {
        if (bf16) {
          const uint16_t b = FloatToBFloat16(f);
          data.append(reinterpret_cast<const char*>(&b), 2);
        } else {
          data.append(reinterpret_cast<const char*>(&f), 4);
        }
      }
      header += (header.size() > 1 ? "," : "") +
                ("\"" + name + "\":{\"dtype\":\"" + (bf16 ? "BF16" : "F32") + "\",\"shape\":[" +
                 shape + "],\"data_offsets\":[" + std::to_string(begin) + "," +
                 std::to_string(data.size()) + "]}");
    }
    header += "}";
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(path, std::ios::binary) << out << header << data;
  }

 private:
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> tensors_;
};

constexpr int kH = 32, kI = 64, kLayers = 2, kVocab = 50, kPos = 16;

const char* kTinyConfig = R"({"model_type":"bert","architectures":["BertModel"],
  "hidden_size":32,"num_hidden_layers":2,"num_attention_heads":2,"intermediate_size":64,
  "vocab_size":50,"max_position_embeddings":16,"type_vocab_size":2,"layer_norm_eps":1e-12,
  "hidden_act":"gelu"})";

// A random tiny BERT; `prefix` "bert." and `old_norm_names` exercise the name aliases.
TinyCheckpoint MakeTiny(const std::string& prefix = "", bool old_norm_names = false) {
  TinyCheckpoint ck;
  uint32_t seed = 1;
  const std::string g = old_norm_names ? "gamma" : "weight", b = old_norm_names ? "beta" : "bias";
  const std::string e = prefix + "embeddings.";
  ck.Add(e + "word_embeddings.weight", {kVocab, kH}, seed++);
  ck.Add(e + "position_embeddings.weight", {kPos, kH}, seed++);
  ck.Add(e + "token_type_embeddings.weight", {2, kH}, seed++);
  ck.Add(e + "LayerNorm." + g, {kH}, seed++);
  ck.Add(e + "LayerNorm." + b, {kH}, seed++);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = prefix + "encoder.layer." + std::to_string(l) + ".";
    for (const char* t : {"query", "key", "value"}) {
      ck.Add(p + "attention.self." + t + ".weight", {kH, kH}, seed++);
      ck.Add(p + "attention.self." + t + ".bias", {kH}, seed++);
    }
    ck.Add(p + "attention.output.dense.weight", {kH, kH}, seed++);
    ck.Add(p + "attention.output.dense.bias", {kH}, seed++);
    ck.Add(p + "attention.output.LayerNorm." + g, {kH}, seed++);
    ck.Add(p + "attention.output.LayerNorm." + b, {kH}, seed++);
    ck.Add(p + "intermediate.dense.weight", {kI, kH}, seed++);
    ck.Add(p + "intermediate.dense.bias", {kI}, seed++);
    ck.Add(p + "output.dense.weight", {kH, kI}, seed++);
    ck.Add(p + "output.dense.bias", {kH}, seed++);
    ck.Add(p + "output.LayerNorm." + g, {kH}, seed++);
    ck.Add(p + "output.LayerNorm." + b, {kH}, seed++);
  }
  ck.Add(prefix + "pooler.dense.weight", {kH, kH}, seed++);  // present in checkpoints, unused
  return ck;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "petal_bert_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Loaded {
  ModelConfig config;
  std::unique_ptr<WeightStore> store;
};

// Writes `ck` with the tiny config to a fresh folder and opens it.
Loaded WriteAndOpen(const TinyCheckpoint& ck, const TempDir& dir, bool bf16 = false) {
  std::ofstream(JoinPath(dir.path(), "config.json")) << kTinyConfig;
  ck.Write(JoinPath(dir.path(), "model.safetensors"), bf16);
  Loaded l;
  auto c = LoadModelConfig(dir.path());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  l.config = *c;
  auto s = WeightStore::Open(dir.path());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  l.store = std::move(s).value();
  return l;
}

TEST(BertLoadTest, FusesQkvInQueryKeyValueOrder) {
  TempDir dir;
  Loaded l = WriteAndOpen(MakeTiny(), dir);
  auto w = LoadBertWeights(l.config, *l.store);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->layers.size(), 2u);
  const auto& qkv = w->layers[1].qkv_weight;
  ASSERT_EQ(qkv.size(), size_t{3 * kH * kH});
  const char* names[] = {"query", "key", "value"};
  for (int part = 0; part < 3; ++part) {
    const std::string base = std::string("encoder.layer.1.attention.self.") + names[part];
    auto wt = l.store->ReadF32(base + ".weight", {kH, kH});
    auto bs = l.store->ReadF32(base + ".bias", {kH});
    ASSERT_TRUE(wt.ok() && bs.ok());
    EXPECT_TRUE(std::equal(wt->begin(), wt->end(), qkv.begin() + part * kH * kH)) << names[part];
    EXPECT_TRUE(std::equal(bs->begin(), bs->end(), w->layers[1].qkv_bias.begin() + part * kH))
        << names[part];
  }
}

TEST(BertLoadTest, Bf16CheckpointLoadsAsRoundedFloats) {
  TempDir f32_dir, bf16_dir;
  Loaded f32 = WriteAndOpen(MakeTiny(), f32_dir);
  Loaded bf16 = WriteAndOpen(MakeTiny(), bf16_dir, /*bf16=*/true);
  auto a = LoadBertWeights(f32.config, *f32.store);
  auto b = LoadBertWeights(bf16.config, *bf16.store);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto& x = a->layers[1].ffn_out_weight;
  const auto& y = b->layers[1].ffn_out_weight;
  ASSERT_EQ(x.size(), y.size());
  int changed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], BFloat16ToFloat(FloatToBFloat16(x[i]))) << i;
    changed += y[i] != x[i];
  }
  EXPECT_GT(changed, 0);  // the rounding really happened
}

TEST(BertLoadTest, MissingTensorIsNamed) {
  for (const std::string victim :
       {"encoder.layer.1.output.dense.weight", "embeddings.LayerNorm.bias",
        "encoder.layer.0.attention.self.value.bias"}) {
    TempDir dir;
    TinyCheckpoint ck = MakeTiny();
    ck.Remove(victim);
    Loaded l = WriteAndOpen(ck, dir);
    auto w = LoadBertWeights(l.config, *l.store);
    ASSERT_FALSE(w.ok()) << victim;
    EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
    EXPECT_NE(w.status().message().find("'" + victim + "'"), std::string::npos)
        << w.status().message();
  }
}

TEST(BertLoadTest, MisShapedTensorIsNamed) {
  TempDir dir;
  TinyCheckpoint ck = MakeTiny();
  ck.Reshape("encoder.layer.0.attention.self.key.weight", {kH, kH + 1}, 99);
  Loaded l = WriteAndOpen(ck, dir);
  auto w = LoadBertWeights(l.config, *l.store);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("encoder.layer.0.attention.self.key.weight"),
            std::string::npos)
      << w.status().message();
  EXPECT_NE(w.status().message().find("[32, 33]"), std::string::npos) << w.status().message();
}

// A straightforward single-sequence BERT forward, written independently of BertCpuModel's
// buffer layout, reading the unfused checkpoint tensors.
std::vector<float> NaiveForward(const WeightStore& s, const std::vector<int32_t>& ids) {
  auto R = [&](const std::string& n, std::vector<int64_t> shape) {
    auto v = s.ReadF32(n, shape);
    EXPECT_TRUE(v.ok()) << n;
    return *v;
  };
  const int n = static_cast<int>(ids.size()), heads = 2, d = kH / heads;
  auto linear = [](const std::vector<double>& x, const std::vector<float>& w,
                   const std::vector<float>& b, int rows, int out, int in) {
    std::vector<double> y(rows * out);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) {
        double acc = b[o];
        for (int i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
        y[r * out + o] = acc;
      }
    return y;
  };
  auto norm = [&](std::vector<double>& x, const std::string& p) {
    auto g = R(p + ".weight", {kH}), b = R(p + ".bias", {kH});
    for (int r = 0; r < n; ++r) {
      double mu = 0, var = 0;
      for (int i = 0; i < kH; ++i) mu += x[r * kH + i] / kH;
      for (int i = 0; i < kH; ++i) var += (x[r * kH + i] - mu) * (x[r * kH + i] - mu) / kH;
      for (int i = 0; i < kH; ++i)
        x[r * kH + i] = (x[r * kH + i] - mu) / std::sqrt(var + 1e-12) * g[i] + b[i];
    }
  };
  auto word = R("embeddings.word_embeddings.weight", {kVocab, kH});
  auto pos = R("embeddings.position_embeddings.weight", {kPos, kH});
  auto type = R("embeddings.token_type_embeddings.weight", {2, kH});
  std::vector<double> x(n * kH);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < kH; ++i) x[t * kH + i] = word[ids[t] * kH + i] + pos[t * kH + i] + type[i];
  norm(x, "embeddings.LayerNorm");
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    auto lin = [&](const std::vector<double>& in, const std::string& name, int out, int inner) {
      return linear(in, R(p + name + ".weight", {out, inner}), R(p + name + ".bias", {out}), n, out,
                    inner);
    };
    auto q = lin(x, "attention.self.query", kH, kH), k = lin(x, "attention.self.key", kH, kH),
         v = lin(x, "attention.self.value", kH, kH);
    std::vector<double> ctx(n * kH, 0.0);
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < n; ++i) {
        std::vector<double> sc(n);
        double mx = -1e300, sum = 0;
        for (int j = 0; j < n; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += q[i * kH + h * d + e] * k[j * kH + h * d + e];
          sc[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, sc[j]);
        }
        for (double& z : sc) sum += (z = std::exp(z - mx));
        for (int j = 0; j < n; ++j)
          for (int e = 0; e < d; ++e)
            ctx[i * kH + h * d + e] += sc[j] / sum * v[j * kH + h * d + e];
      }
    auto a = lin(ctx, "attention.output.dense", kH, kH);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    norm(x, p + "attention.output.LayerNorm");
    auto mid = lin(x, "intermediate.dense", kI, kH);
    for (double& z : mid) z = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
    auto o = lin(mid, "output.dense", kH, kI);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    norm(x, p + "output.LayerNorm");
  }
  return std::vector<float>(x.begin(), x.end());
}

TEST(BertForwardTest, TinyModelMatchesNaiveReferenceAndAliases) {
  TempDir plain_dir, alias_dir;
  Loaded plain = WriteAndOpen(MakeTiny(), plain_dir);
  Loaded alias = WriteAndOpen(MakeTiny("bert.", /*old_norm_names=*/true), alias_dir);
  auto m1 = LoadBertCpuModel(plain.config, *plain.store);
  auto m2 = LoadBertCpuModel(alias.config, *alias.store);
  ASSERT_TRUE(m1.ok()) << m1.status().ToString();
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  const std::vector<std::vector<int32_t>> seqs = {{1, 5, 9, 2}, {7}, {3, 3, 4, 8, 10, 49, 0, 2}};
  Batch batch = Batch::FromSequences(seqs);
  std::vector<float> h1, h2;
  ASSERT_TRUE((*m1)->Forward(batch, &h1).ok());
  ASSERT_TRUE((*m2)->Forward(batch, &h2).ok());
  EXPECT_EQ(h1, h2);  // same values under either naming
  for (int s = 0; s < batch.num_seqs(); ++s) {
    auto ref = NaiveForward(*plain.store, seqs[s]);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(h1[batch.cu_seqlens[s] * kH + i], ref[i], 2e-4) << "seq " << s << " i " << i;
    }
  }
  // Token type 1 changes the result; explicit zeros do not.
  Batch typed = batch;
  typed.token_type_ids.assign(batch.num_tokens(), 0);
  std::vector<float> h3;
  ASSERT_TRUE((*m1)->Forward(typed, &h3).ok());
  EXPECT_EQ(h1, h3);
  typed.token_type_ids.assign(batch.num_tokens(), 1);
  ASSERT_TRUE((*m1)->Forward(typed, &h3).ok());
  EXPECT_NE(h1, h3);
  typed.token_type_ids[0] = 2;
  EXPECT_FALSE((*m1)->Forward(typed, &h3).ok());
  Batch too_long = Batch::FromSequences({std::vector<int32_t>(kPos + 1, 1)});
  EXPECT_FALSE((*m1)->Forward(too_long, &h3).ok());
}

}  // namespace
}  // namespace petal
