// The CPU engine's bf16 path and its start-up fidelity gate (`--cpu-precision auto`), on real
// all-MiniLM-L6-v2 weights (skipped if absent), the tiny Qwen3 fixture and its goldens.
// Tolerances: bf16 against the fp32 reference forward, worst cosine >= 0.999 on random ragged
// batches (the gate's own rule; measured ~0.9999+); against the sentence-transformers / HF goldens
// >= 0.999. The gate: bf16 passes at 0.999 and is refused at a threshold above 1; int8 (0.99 on
// MiniLM) is refused at 0.999. Tests that need AVX512-BF16 skip, saying why, where the CPU (or
// the PETAL_CPU_ISA cap) has none; on such a CPU explicit bf16 must fail and auto must run fp32.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "engine/cpu_precision_gate.h"
#include "kernels/cpu/cpu_bf16_gemm.h"
#include "model/cpu_fast.h"

namespace petal {
namespace {

std::string SourcePath(const std::string& p) {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return JoinPath(s ? s : ".", p);
}
std::string MiniLmDir() { return SourcePath("models/all-MiniLM-L6-v2"); }

#define SKIP_WITHOUT_MINILM() \
  if (!FileExists(JoinPath(MiniLmDir(), "model.safetensors"))) GTEST_SKIP() << "no MiniLM";
#define SKIP_WITHOUT_BF16()                        \
  if (std::string why; !cpu::HaveBf16Gemm(&why)) { \
    GTEST_SKIP() << "bf16 path skipped: " << why;  \
  }

Batch RandomBatch(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(std::min(1000, vocab / 2), vocab - 1);
  Batch b;
  for (int len : {1, 33, 7, 65, 200, 31, 128}) {
    std::vector<int32_t> ids(len);
    for (auto& t : ids) t = tok(rng);
    b.Add(ids);
  }
  return b;
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb + 1e-30);
}

double WorstCosine(const Embeddings& a, const Embeddings& b) {
  double worst = 1.0;
  for (int r = 0; r < a.rows; ++r) worst = std::min(worst, Cosine(a.row(r), b.row(r), a.dim));
  return worst;
}

// Worst cosine of `engine` against a golden file: {"cases": [{"ids", "embedding"}]} or
// {"embeddings"} with the ids in `ids_file` {"sequences"}. One text per batch, as made.
double GoldenWorst(Engine& engine, const std::string& golden, const std::string& ids_file = "") {
  simdjson::dom::parser p1, p2;
  simdjson::dom::element g, ids;
  EXPECT_EQ(p1.load(golden).get(g), simdjson::SUCCESS) << golden;
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> embs;
  auto floats = [](simdjson::dom::array a) {
    std::vector<float> v;
    for (auto x : a) v.push_back(static_cast<float>(double(x)));
    return v;
  };
  auto ints = [](simdjson::dom::array a) {
    std::vector<int32_t> v;
    for (auto x : a) v.push_back(static_cast<int32_t>(int64_t(x)));
    return v;
  };
  if (ids_file.empty()) {
    for (simdjson::dom::element c : g["cases"].get_array()) {
      seqs.push_back(ints(c["ids"].get_array()));
      embs.push_back(floats(c["embedding"].get_array()));
    }
  } else {
    EXPECT_EQ(p2.load(ids_file).get(ids), simdjson::SUCCESS) << ids_file;
    for (auto v : ids["sequences"].get_array()) seqs.push_back(ints(v.get_array()));
    for (auto v : g["embeddings"].get_array()) embs.push_back(floats(v.get_array()));
  }
  EXPECT_EQ(seqs.size(), embs.size());
  EXPECT_GT(seqs.size(), 0u);
  double worst = 1.0;
  for (size_t i = 0; i < seqs.size() && i < embs.size(); ++i) {
    if (seqs[i].empty()) continue;
    auto e = engine.Embed(Batch::FromSequences({seqs[i]}));
    EXPECT_TRUE(e.ok());
    if (!e.ok() || e->dim != static_cast<int>(embs[i].size())) return 0.0;
    worst = std::min(worst, Cosine(e->row(0), embs[i].data(), e->dim));
  }
  return worst;
}

void ExpectBf16TracksReference(const std::string& dir) {
  auto ref = CpuEngine::Load(dir, {.precision = "reference"});
  auto bf16 = CpuEngine::Load(dir, {.precision = "bf16"});
  ASSERT_TRUE(ref.ok() && bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ((*bf16)->path(), "bf16");
  const Batch b = RandomBatch((*ref)->config().vocab_size, 11);
  auto r = (*ref)->Embed(b), x = (*bf16)->Embed(b), x2 = (*bf16)->Embed(b);
  ASSERT_TRUE(r.ok() && x.ok() && x2.ok());
  const double worst = WorstCosine(*x, *r);
  std::printf("%s: bf16 worst cosine vs fp32 reference %.6f\n", dir.c_str(), worst);
  EXPECT_GE(worst, 0.999);
  EXPECT_EQ(x->data, x2->data);  // run to run bit for bit
}

TEST(CpuBf16EngineTest, MiniLmBf16TracksReferenceAndGoldens) {
  SKIP_WITHOUT_MINILM();
  SKIP_WITHOUT_BF16();
  ExpectBf16TracksReference(MiniLmDir());
  auto bf16 = CpuEngine::Load(MiniLmDir(), {.precision = "bf16"});
  ASSERT_TRUE(bf16.ok());
  const double g = GoldenWorst(**bf16, SourcePath("tests/fixtures/golden_all-MiniLM-L6-v2.json"));
  std::printf("MiniLM bf16 worst cosine vs sentence-transformers goldens %.6f\n", g);
  EXPECT_GE(g, 0.999);
}

TEST(CpuBf16EngineTest, TinyQwen3Bf16TracksReferenceAndGoldens) {
  SKIP_WITHOUT_BF16();
  const std::string dir = SourcePath("tests/fixtures/qwen3-tiny-bidir");
  ExpectBf16TracksReference(dir);
  auto bf16 = CpuEngine::Load(dir, {.precision = "bf16"});
  ASSERT_TRUE(bf16.ok());
  const double g = GoldenWorst(**bf16, SourcePath("tests/fixtures/golden_qwen3-tiny-bidir.json"),
                               SourcePath("tests/fixtures/qwen3_tiny_inputs.json"));
  std::printf("tiny Qwen3 bf16 worst cosine vs HF goldens %.6f\n", g);
  EXPECT_GE(g, 0.999);
}

TEST(CpuBf16EngineTest, GateAcceptsBf16AndRefusesInt8OnMiniLm) {
  SKIP_WITHOUT_MINILM();
  SKIP_WITHOUT_BF16();
  auto config = LoadModelConfig(MiniLmDir());
  auto store = WeightStore::Open(MiniLmDir());
  ASSERT_TRUE(config.ok() && store.ok());
  auto ref = LoadCpuModel(*config, **store);
  auto bf16 = LoadFastCpuModel(*config, **store, cpu::CpuPrecision::kBf16);
  auto int8 = LoadFastCpuModel(*config, **store, cpu::CpuPrecision::kInt8);
  ASSERT_TRUE(ref.ok() && bf16.ok() && int8.ok());
  auto a = RunCpuFidelityGate(**bf16, **ref), q = RunCpuFidelityGate(**int8, **ref);
  ASSERT_TRUE(a.ok() && q.ok());
  std::printf("gate probe (%d sequences, %d tokens): bf16 %.6f, int8 %.6f\n", a->sequences,
              a->tokens, a->min_cosine, q->min_cosine);
  EXPECT_EQ(a->sequences, 4);
  EXPECT_GE(a->min_cosine, kCpuGateMinCosine);
  EXPECT_LT(q->min_cosine, kCpuGateMinCosine);
  // The probe batch is fixed: the same tokens every time.
  EXPECT_EQ(CpuGateProbeBatch(*config).token_ids, CpuGateProbeBatch(*config).token_ids);
}

TEST(CpuBf16EngineTest, AutoPicksBf16OnlyWhenTheGatePasses) {
  SKIP_WITHOUT_MINILM();
  auto pass = CpuEngine::Load(MiniLmDir(), {.precision = "auto"});
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  std::printf("auto: %s\n", (*pass)->Describe().c_str());
  if (!cpu::HaveBf16Gemm()) {
    EXPECT_EQ((*pass)->path(), "fp32");
    EXPECT_EQ((*pass)->gate().sequences, 0);  // no gate without bf16 hardware
    GTEST_SKIP() << "no bf16 on this CPU: auto runs fp32 without a gate (checked)";
  }
  EXPECT_EQ((*pass)->path(), "bf16");
  EXPECT_GE((*pass)->gate().min_cosine, 0.999);
  EXPECT_NE((*pass)->Describe().find("passed the fidelity gate"), std::string::npos);
  // A threshold no reduced precision can meet: auto falls back to fp32 and says why.
  auto refuse = CpuEngine::Load(MiniLmDir(), {.precision = "auto", .bf16_min_cosine = 1.000001});
  ASSERT_TRUE(refuse.ok());
  EXPECT_EQ((*refuse)->path(), "fp32");
  EXPECT_GT((*refuse)->gate().sequences, 0);
  EXPECT_NE((*refuse)->Describe().find("bf16 refused"), std::string::npos) << (*refuse)->Describe();
  auto e = (*refuse)->Embed(RandomBatch(30522, 2));
  EXPECT_TRUE(e.ok());
}

// A CPU without AVX512-BF16 (forced with PETAL_CPU_ISA=avx512, read once per process: hence a
// child process): explicit bf16 fails with a clear error, auto runs fp32 without a gate.
TEST(CpuBf16EngineTest, Bf16WithoutHardwareFailsClearly) {
  SKIP_WITHOUT_MINILM();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("PETAL_CPU_ISA", "avx512", 1);
        auto b = CpuEngine::Load(MiniLmDir(), {.precision = "bf16"});
        auto a = CpuEngine::Load(MiniLmDir(), {.precision = "auto"});
        const bool ok = !b.ok() && b.status().code() == StatusCode::kFailedPrecondition &&
                        b.status().message().find("avx512_bf16") != std::string::npos && a.ok() &&
                        (*a)->path() == "fp32" && (*a)->gate().sequences == 0;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace petal
