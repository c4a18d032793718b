#include "model/make_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "common/file_util.h"
#include "engine/cpu_engine.h"

namespace petal {
namespace {

std::string TempDir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("petal_mm_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

MakeModelOptions Tiny(const std::string& dir, uint64_t seed, DType dtype, AttentionMask mask) {
  MakeModelOptions o;
  o.shape = "qwen3-tiny";
  o.out_dir = dir;
  o.seed = seed;
  o.dtype = dtype;
  o.mask = mask;
  return o;
}

std::vector<float> Read(const std::string& dir, const std::string& name,
                        std::vector<int64_t> shape) {
  auto store = WeightStore::Open(dir);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  auto v = (*store)->ReadF32(name, shape);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::vector<float>{};
}

void MeanStd(const std::vector<float>& v, double* mean, double* std) {
  double s = 0, ss = 0;
  for (float x : v) s += x, ss += double(x) * x;
  *mean = s / v.size();
  *std = std::sqrt(ss / v.size() - *mean * *mean);
}

TEST(MakeModelTest, WritesALoadableCheckpointWithConfigFromShape) {
  const std::string dir = TempDir("bidir");
  ASSERT_TRUE(MakeModel(Tiny(dir, 1, DType::kBF16, AttentionMask::kBidirectional)).ok());
  auto c = LoadModelConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_EQ(c->hf_architecture, "Qwen3Model");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->mask, AttentionMask::kBidirectional);
  EXPECT_EQ(c->pooling, PoolingMode::kMean);
  EXPECT_TRUE(c->normalize);
  auto engine = CpuEngine::Load(dir);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto emb = (*engine)->Embed(Batch::FromSequences({{1, 2, 3}, {999}}));
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < emb->dim; ++i) ss += double(emb->row(r)[i]) * emb->row(r)[i];
    EXPECT_NEAR(ss, 1.0, 1e-5);
  }
  std::filesystem::remove_all(dir);
}

TEST(MakeModelTest, CausalDefaultsToLastTokenPooling) {
  const std::string dir = TempDir("causal");
  ASSERT_TRUE(MakeModel(Tiny(dir, 1, DType::kF32, AttentionMask::kCausal)).ok());
  auto c = LoadModelConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mask, AttentionMask::kCausal);
  EXPECT_EQ(c->pooling, PoolingMode::kLastToken);
  std::filesystem::remove_all(dir);
}

TEST(MakeModelTest, WeightsAreSeededRealisticAndDtypeIndependent) {
  const std::string a = TempDir("a"), b = TempDir("b"), f = TempDir("f");
  ASSERT_TRUE(MakeModel(Tiny(a, 7, DType::kBF16, AttentionMask::kBidirectional)).ok());
  ASSERT_TRUE(MakeModel(Tiny(b, 7, DType::kBF16, AttentionMask::kBidirectional)).ok());
  ASSERT_TRUE(MakeModel(Tiny(f, 7, DType::kF32, AttentionMask::kBidirectional)).ok());
  EXPECT_EQ(*ReadFile(a + "/model.safetensors"), *ReadFile(b + "/model.safetensors"));

  const std::string q = "layers.1.self_attn.q_proj.weight";
  auto qa = Read(a, q, {128, 64}), qf = Read(f, q, {128, 64});
  ASSERT_EQ(qa.size(), qf.size());
  for (size_t i = 0; i < qa.size(); ++i) {
    ASSERT_EQ(qa[i], BFloat16ToFloat(FloatToBFloat16(qf[i]))) << i;
  }
  double mean, std;
  MeanStd(Read(f, "embed_tokens.weight", {1000, 64}), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std, 0.02, 1e-3);
  MeanStd(Read(f, "layers.0.input_layernorm.weight", {64}), &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_GT(std, 0.05);  // not trivially all ones
  EXPECT_LT(std, 0.15);

  MakeModelOptions other = Tiny(b, 8, DType::kBF16, AttentionMask::kBidirectional);
  ASSERT_TRUE(MakeModel(other).ok());
  EXPECT_NE(Read(a, q, {128, 64}), Read(b, q, {128, 64}));
  for (const auto& d : {a, b, f}) std::filesystem::remove_all(d);
}

TEST(MakeModelTest, RejectsUnknownShape) {
  MakeModelOptions o;
  o.shape = "qwen3-huge";
  o.out_dir = TempDir("unknown");
  Status s = MakeModel(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pplx-embed-v1-0.6b"), std::string::npos) << s.message();
  auto shape = FindModelShape("pplx-embed-v1-0.6b");
  ASSERT_TRUE(shape.ok());
  EXPECT_NEAR(ConfigForShape(*shape).ParameterCount() / 1e9, 0.6, 0.05);
  auto big = FindModelShape("pplx-embed-v1-4b");
  ASSERT_TRUE(big.ok());
  EXPECT_NEAR(ConfigForShape(*big).ParameterCount() / 1e9, 4.0, 0.1);
}

}  // namespace
}  // namespace petal
