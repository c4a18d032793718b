// Tests of petal calibrate's core (calibrate.h) on the CPU fp32 engine and the tiny Qwen3
// fixture: the observer sees exactly the real tokens, layer 0's QKV-input amax equals an
// independent host computation (embedding rows, RMSNorm, norm weight; float64, rel 1e-5), the
// result does not depend on how the texts are batched (rel 1e-5: the fp32 GEMMs change blocking
// with M), and a percentile below 100 gives amax no larger than the maximum.
#include "engine/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "engine/engine_factory.h"

namespace petal {
namespace {

std::string Fixture() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return std::string(s ? s : ".") + "/tests/fixtures/qwen3-tiny-bidir";
}

std::vector<std::vector<int32_t>> RandomSeqs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(1, 24), id(0, 999);
  std::vector<std::vector<int32_t>> seqs(n);
  for (auto& s : seqs) {
    s.resize(len(rng));
    for (int32_t& t : s) t = id(rng);
  }
  return seqs;
}

StatusOr<Fp8Scales> Calibrate(const std::vector<std::vector<int32_t>>& seqs, int batch_tokens,
                              double percentile, int* progress_calls = nullptr) {
  auto config = LoadModelConfig(Fixture());
  if (!config.ok()) return config.status();
  Fp8Calibrator cal(config->num_layers, percentile);
  EngineOptions eo;
  eo.backend = "cpu";
  eo.observer = &cal;
  PETAL_ASSIGN_OR_RETURN(auto engine, CreateEngine(Fixture(), eo));
  return RunCalibration(engine.get(), &cal, seqs, batch_tokens, 64, percentile,
                        [&](const CalibrationProgress&) {
                          if (progress_calls) ++*progress_calls;
                        });
}

TEST(Calibrate, Layer0QkvInputMatchesHostRmsNorm) {
  const auto seqs = RandomSeqs(8, 1);
  int calls = 0;
  auto s = Calibrate(seqs, 30, 100.0, &calls);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  int64_t tokens = 0;
  for (const auto& q : seqs) tokens += q.size();
  EXPECT_EQ(s->tokens, tokens);
  EXPECT_EQ(s->texts, 8);
  EXPECT_EQ(s->backend, "cpu");
  EXPECT_EQ(s->statistic, "max");
  EXPECT_GT(calls, 1);
  for (float a : s->amax) EXPECT_TRUE(std::isfinite(a) && a > 0.f) << a;

  auto store = WeightStore::Open(Fixture());
  ASSERT_TRUE(store.ok());
  auto embed = (*store)->ReadF32("embed_tokens.weight", {1000, 64});
  auto norm = (*store)->ReadF32("layers.0.input_layernorm.weight", {64});
  ASSERT_TRUE(embed.ok() && norm.ok());
  double want = 0;
  for (const auto& q : seqs) {
    for (int32_t id : q) {
      const float* x = embed->data() + size_t(id) * 64;
      double ss = 0;
      for (int i = 0; i < 64; ++i) ss += double(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ss / 64 + 1e-6);
      for (int i = 0; i < 64; ++i) want = std::max(want, std::fabs(x[i] * inv * (*norm)[i]));
    }
  }
  EXPECT_NEAR(s->Amax(0, Fp8Input::kQkv), want, want * 1e-5);
}

TEST(Calibrate, DoesNotDependOnBatching) {
  const auto seqs = RandomSeqs(6, 2);
  auto one_each = Calibrate(seqs, 1, 100.0);  // every text runs alone
  auto all = Calibrate(seqs, 100000, 100.0);  // one batch
  ASSERT_TRUE(one_each.ok() && all.ok());
  ASSERT_EQ(one_each->amax.size(), all->amax.size());
  for (size_t i = 0; i < all->amax.size(); ++i)
    EXPECT_NEAR(one_each->amax[i], all->amax[i], 1e-5 * all->amax[i]) << i;
}

TEST(Calibrate, PercentileIsAtMostTheMaximum) {
  const auto seqs = RandomSeqs(8, 3);
  auto max = Calibrate(seqs, 200, 100.0);
  auto p90 = Calibrate(seqs, 200, 90.0);
  ASSERT_TRUE(max.ok() && p90.ok());
  EXPECT_EQ(p90->statistic, "percentile");
  int smaller = 0;
  for (size_t i = 0; i < max->amax.size(); ++i) {
    EXPECT_LE(p90->amax[i], max->amax[i]);
    smaller += p90->amax[i] < max->amax[i];
  }
  EXPECT_GT(smaller, 0);
}

TEST(Calibrate, EngineRefusesStaticScalesWithoutFp8) {
  EngineOptions eo;
  eo.backend = "cpu";
  eo.cuda.fp8_scales = "/nonexistent";
  auto e = CreateEngine(Fixture(), eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("needs --quantize fp8"), std::string::npos)
      << e.status().ToString();
}

TEST(Calibrate, RefusesEmptyInput) {
  EXPECT_FALSE(Calibrate({}, 100, 100.0).ok());
  EXPECT_FALSE(Calibrate({{1, 2}, {}}, 100, 100.0).ok());
}

}  // namespace
}  // namespace petal
