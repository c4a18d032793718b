// Tests of the static fp8 scales (fp8_scales.h): the calibrator's statistics on known values, the
// file's round trip, and the refusal of a file calibrated on another model (other config, other
// weights of the same shapes, malformed or other-version files), on the tiny Qwen3 fixtures.
#include "model/fp8_scales.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/file_util.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

std::string Fixture(const std::string& name) {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return std::string(s ? s : ".") + "/tests/fixtures/" + name;
}

std::string TempDir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("petal_fp8s_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p.string();
}

struct Loaded {
  ModelConfig config;
  std::unique_ptr<WeightStore> store;
};
Loaded Load(const std::string& dir) {
  Loaded l;
  auto c = LoadModelConfig(dir);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  l.config = *c;
  auto s = WeightStore::Open(dir);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  l.store = std::move(*s);
  return l;
}

TEST(Fp8Calibrator, MaxIsTheLargestPerTokenValue) {
  Fp8Calibrator cal(2, 100.0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 10.f);
  std::vector<float> want(8, 0.f);
  for (int call = 0; call < 5; ++call) {
    for (int l = 0; l < 2; ++l) {
      for (int w = 0; w < kFp8Inputs; ++w) {
        std::vector<float> rows(3 + call);
        for (float& v : rows) v = u(rng);
        for (float v : rows) want[l * 4 + w] = std::max(want[l * 4 + w], v);
        cal.ObserveRowAmax(l, static_cast<Fp8Input>(w), rows.data(), int(rows.size()));
      }
    }
  }
  auto got = cal.Amax();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, want);
  EXPECT_EQ(cal.rows(1, Fp8Input::kDown), 3 + 4 + 5 + 6 + 7);
}

TEST(Fp8Calibrator, PercentileIsNearestRank) {
  Fp8Calibrator cal(1, 99.0);
  std::vector<float> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = float(1000 - i);  // 1000 .. 1, in two calls
  for (int w = 0; w < kFp8Inputs; ++w) {
    cal.ObserveRowAmax(0, static_cast<Fp8Input>(w), v.data(), 600);
    cal.ObserveRowAmax(0, static_cast<Fp8Input>(w), v.data() + 600, 400);
  }
  auto got = cal.Amax();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (float a : *got) EXPECT_EQ(a, 990.f);  // rank ceil(0.99 * 1000) = 990 of 1..1000
}

TEST(Fp8Calibrator, RefusesUnobservedAndNonFinite) {
  Fp8Calibrator cal(2, 100.0);
  const float one = 1.f;
  for (int w = 0; w < kFp8Inputs; ++w) cal.ObserveRowAmax(0, static_cast<Fp8Input>(w), &one, 1);
  auto missing = cal.Amax();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("layer 1 qkv_in was never observed"), std::string::npos)
      << missing.status().ToString();
  const float inf = INFINITY;
  for (int w = 0; w < kFp8Inputs; ++w) cal.ObserveRowAmax(1, static_cast<Fp8Input>(w), &inf, 1);
  auto overflow = cal.Amax();
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("non-finite"), std::string::npos);
}

Fp8Scales SampleScales(const Loaded& m) {
  Fp8Scales s;
  s.model = FingerprintModel(m.config, *m.store);
  s.backend = "cpu";
  s.texts = 3;
  s.tokens = 77;
  s.max_length = 40;
  s.statistic = "percentile";
  s.percentile = 99.5;
  for (int i = 0; i < m.config.num_layers * kFp8Inputs; ++i)
    s.amax.push_back(std::ldexp(1.f + 0.123456789f * i, i % 7 - 3));
  s.amax[1] = 0.f;  // an all-zero tensor
  return s;
}

TEST(Fp8Scales, RoundTripsThroughTheFile) {
  Loaded m = Load(Fixture("qwen3-tiny-bidir"));
  const Fp8Scales s = SampleScales(m);
  const std::string dir = TempDir("roundtrip") + "/nested";
  ASSERT_TRUE(WriteFp8Scales(dir, s).ok());
  auto back = LoadFp8ScalesFor(dir, m.config, *m.store);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->amax, s.amax);  // %.9g round-trips every float exactly
  EXPECT_EQ(back->statistic, "percentile");
  EXPECT_EQ(back->percentile, 99.5);
  EXPECT_EQ(back->backend, "cpu");
  EXPECT_EQ(back->texts, 3);
  EXPECT_EQ(back->tokens, 77);
  EXPECT_EQ(back->max_length, 40);
  EXPECT_EQ(DescribeMismatch(back->model, s.model), "");
  const std::vector<float> d = back->DequantScales();
  EXPECT_EQ(d[0], s.amax[0] / 448.f);
  EXPECT_EQ(d[1], 1e-12f / 448.f);  // floored as the dynamic kernels floor an all-zero row
  fs::remove_all(fs::path(dir).parent_path());
}

TEST(Fp8Scales, RefusesAFileFromAnotherModel) {
  Loaded bidir = Load(Fixture("qwen3-tiny-bidir"));
  Loaded causal = Load(Fixture("qwen3-tiny-causal"));
  const std::string dir = TempDir("other");
  ASSERT_TRUE(WriteFp8Scales(dir, SampleScales(bidir)).ok());
  auto r = LoadFp8ScalesFor(dir, causal.config, *causal.store);
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find(dir + "/fp8_scales.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("another model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_layers 2 (file) vs 3 (model)"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(Fp8Scales, RefusesSameShapesWithOtherWeights) {
  const std::string src = Fixture("qwen3-tiny-bidir");
  const std::string copy = TempDir("weights");
  fs::create_directories(copy);
  for (const auto& e : fs::directory_iterator(src))
    fs::copy(e.path(), copy + "/" + e.path().filename().string(), fs::copy_options::recursive);
  {  // flip one byte of the first tensor's data
    const std::string st = copy + "/model.safetensors";
    auto bytes = ReadFile(st);
    ASSERT_TRUE(bytes.ok());
    uint64_t header = 0;
    std::memcpy(&header, bytes->data(), 8);
    (*bytes)[8 + header + 3] ^= 0x01;
    std::ofstream(st, std::ios::binary | std::ios::trunc) << *bytes;
  }
  Loaded orig = Load(src), changed = Load(copy);
  const ModelFingerprint a = FingerprintModel(orig.config, *orig.store);
  const ModelFingerprint b = FingerprintModel(changed.config, *changed.store);
  EXPECT_EQ(a.config_hash, b.config_hash);
  EXPECT_EQ(a.tensors_hash, b.tensors_hash);
  EXPECT_NE(DescribeMismatch(a, b).find("weights hash"), std::string::npos)
      << DescribeMismatch(a, b);
  const std::string dir = TempDir("weights_scales");
  ASSERT_TRUE(WriteFp8Scales(dir, SampleScales(orig)).ok());
  EXPECT_EQ(LoadFp8ScalesFor(dir, changed.config, *changed.store).status().code(),
            StatusCode::kFailedPrecondition);
  fs::remove_all(dir);
  fs::remove_all(copy);
}

TEST(Fp8Scales, DescribesEachKindOfMismatch) {
  Loaded m = Load(Fixture("qwen3-tiny-bidir"));
  const ModelFingerprint a = FingerprintModel(m.config, *m.store);
  EXPECT_EQ(DescribeMismatch(a, a), "");
  ModelFingerprint b = a;
  b.config_hash = "0000000000000000";
  EXPECT_NE(DescribeMismatch(a, b).find("config hash"), std::string::npos);
  b = a;
  b.tensors_hash = "0000000000000000";
  EXPECT_NE(DescribeMismatch(a, b).find("tensor names"), std::string::npos);
  b = a;
  b.hidden_size = 128;
  EXPECT_EQ(DescribeMismatch(a, b), "hidden_size 64 (file) vs 128 (model)");
  ModelConfig eps = m.config;
  eps.norm_eps = 1e-5f;  // a config field that changes no shape
  EXPECT_NE(FingerprintModel(eps, *m.store).config_hash, a.config_hash);
}

TEST(Fp8Scales, RefusesMalformedFiles) {
  Loaded m = Load(Fixture("qwen3-tiny-bidir"));
  const std::string dir = TempDir("malformed");
  ASSERT_TRUE(WriteFp8Scales(dir, SampleScales(m)).ok());
  auto text = ReadFile(dir + "/fp8_scales.json");
  ASSERT_TRUE(text.ok());
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = *text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    return ParseFp8Scales(t, "x.json");
  };
  auto v2 = edit("\"version\": 1", "\"version\": 2");
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("version 2 is not supported"), std::string::npos);
  auto layers = edit("\"num_layers\": 2", "\"num_layers\": 3");
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.status().message().find("2 layers listed"), std::string::npos)
      << layers.status().ToString();
  EXPECT_FALSE(edit("\"qkv_in\": ", "\"qkv\": ").ok());
  EXPECT_FALSE(edit("petal-fp8-scales", "other").ok());
  EXPECT_FALSE(ParseFp8Scales("{", "x.json").ok());
  EXPECT_EQ(LoadFp8ScalesFor(dir + "/absent", m.config, *m.store).status().code(),
            StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace petal
