// The SPLADE fixtures (tests/fixtures/classify/bert-splade: BertForMaskedLM + SpladePooling, tied
// decoder, vocabulary 30522, not a multiple of 8; xlmr-splade: XLMRobertaForMaskedLM's lm_head,
// vocabulary 250002) on the CUDA engine (bf16) against the CPU engine
// (fp32) on the same folder and ids: per text, the same non-zero set (ties aside: an entry may be
// non-zero on one engine only if its value there is below kNearZero, a logit that bf16 rounding
// can move across 0) and cosine >= 0.999 (issue 31); values within kMaxValueError. The texts run
// twice in one batch plus one more batch of each text alone, with the logits in one chunk and in
// 64-token chunks that cut sequences (CudaEngineOptions::sparse_chunk_tokens), three passes each
// (eager, capture, replay). Both engines answer the sparse form (the CUDA engine compacts on the
// device): indices ascending. The CPU's values are anchored to the float64 reference as in
// classify_test. And a per-row top-k (max_active_dims) against the same engine's full rows. Label
// gpu; skips without a device. Thread-safety: single-threaded test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "classify_fixture.h"
#include "engine/cpu_engine.h"
#include "engine/cuda/cuda_engine.h"
#include "model/config.h"

namespace petal::testing {
namespace {

constexpr double kMinCosine = 0.999;
constexpr double kNearZero = 0.05;
constexpr double kMaxValueError = 0.05;

Batch TextsBatch(const std::vector<ClassifyCase>& cases, int repeat) {
  Batch b;
  b.cu_seqlens.push_back(0);
  for (int r = 0; r < repeat; ++r) {
    for (const auto& c : cases) {
      b.token_ids.insert(b.token_ids.end(), c.ids.begin(), c.ids.end());
      b.cu_seqlens.push_back(static_cast<int32_t>(b.token_ids.size()));
    }
  }
  return b;
}

class SparseGpuTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SparseGpuTest, CudaSpladeRowsMatchTheCpuEngine) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string name = std::get<0>(GetParam());
  const int chunk = std::get<1>(GetParam());
  auto m = LoadClassifyManifest();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  ASSERT_EQ(fx.spec.name, name);
  auto golden = LoadClassifyGolden(name);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto dir = BuildClassifyFolder(*m, fx, *golden);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  const Batch b = TextsBatch(golden->cases, 2);
  const int n = static_cast<int>(golden->cases.size());

  CpuEngineOptions eo;
  eo.precision = "fp32";  // auto picks bf16 on an AVX512-BF16 host (the GPU machine's CPU)
  auto cpu = CpuEngine::Load(*dir, eo);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto want = (*cpu)->Embed(b);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const int vocab = (*cpu)->config().vocab_size;
  ASSERT_EQ(want->dim, vocab);
  for (int i = 0; i < n; ++i) {
    const ClassifyCase& c = golden->cases[i];
    for (size_t k = 0; k < c.top_index.size(); ++k) {
      EXPECT_NEAR(want->DenseRow(i)[c.top_index[k]], c.logits[k], 1e-5) << "cpu text " << i;
    }
  }

  CudaEngineOptions opts;
  opts.max_tokens = 2048;
  opts.max_seqs = 32;
  opts.sparse_chunk_tokens = chunk;
  auto engine = CreateCudaEngine(*dir, opts);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_EQ((*engine)->config().task, ModelTask::kSparse);
  for (int pass = 0; pass < 3; ++pass) {
    for (int alone = -1; alone < n; ++alone) {  // -1: the whole batch; else text `alone` only
      const Batch one = alone < 0 ? b : TextsBatch({golden->cases[alone]}, 1);
      auto e = (*engine)->Embed(one);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      ASSERT_EQ(e->rows, one.num_seqs());
      ASSERT_EQ(e->dim, vocab);
      double worst_cos = 1, worst_err = 0;
      int64_t flips = 0, nnz = 0;
      ASSERT_TRUE(e->sparse()) << "compacted on the device";
      for (int i = 0; i < e->rows; ++i) {
        ASSERT_TRUE(std::is_sorted(e->sparse_indices.begin() + e->sparse_offsets[i],
                                   e->sparse_indices.begin() + e->sparse_offsets[i + 1]));
        const std::vector<float> g_row = e->DenseRow(i);
        const std::vector<float> w_row = want->DenseRow(alone < 0 ? i : alone);
        const float* g = g_row.data();
        const float* w = w_row.data();
        const std::string at = "chunk " + std::to_string(chunk) + " pass " + std::to_string(pass) +
                               (alone < 0 ? " batch" : " alone") + " row " + std::to_string(i);
        double dot = 0, gg = 0, ww = 0;
        int negative = 0, too_far = 0, lone = 0, first_bad = -1;  // counted: one failure per row
        for (int v = 0; v < vocab; ++v) {
          dot += double{g[v]} * w[v];
          gg += double{g[v]} * g[v];
          ww += double{w[v]} * w[v];
          nnz += w[v] > 0;
          const double err = std::abs(double{g[v]} - w[v]);
          worst_err = std::max(worst_err, err);
          const bool bad_value = !(g[v] >= 0.0f) || !(err <= kMaxValueError);
          negative += !(g[v] >= 0.0f);
          too_far += !(err <= kMaxValueError);
          bool bad_set = false;
          if ((g[v] > 0) != (w[v] > 0)) {
            ++flips;
            bad_set = !(std::max(g[v], w[v]) < kNearZero);
            lone += bad_set;
          }
          if ((bad_value || bad_set) && first_bad < 0) first_bad = v;
        }
        EXPECT_EQ(negative + too_far + lone, 0)
            << at << ": " << negative << " negative or NaN values, " << too_far
            << " off by more than " << kMaxValueError << ", " << lone
            << " non-zero on one engine only at >= " << kNearZero << "; first at entry "
            << first_bad << " (cuda " << (first_bad >= 0 ? g[first_bad] : 0) << ", cpu "
            << (first_bad >= 0 ? w[first_bad] : 0) << ")";
        const double cos = dot / std::sqrt(std::max(gg * ww, 1e-300));
        worst_cos = std::min(worst_cos, cos);
        EXPECT_GE(cos, kMinCosine) << at;
      }
      if (alone < 0) {
        std::printf(
            "chunk %d pass %d: worst cosine %.6f, worst |value - cpu| %.3g, %lld of "
            "%lld non-zeros on one engine only (all below %.2g)\n",
            chunk, pass, worst_cos, worst_err, static_cast<long long>(flips),
            static_cast<long long>(nnz), kNearZero);
      }
    }
  }
}

// 0: one chunk (the default sizing); 64: chunks that cut the 48-token sequences.
INSTANTIATE_TEST_SUITE_P(Chunks, SparseGpuTest,
                         ::testing::Combine(::testing::Values("bert-splade", "xlmr-splade"),
                                            ::testing::Values(0, 64)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           n.erase(n.find('-'), 1);
                           return n + "_chunk" + std::to_string(std::get<1>(info.param));
                         });

// Batch::sparse_top_k (max_active_dims) on the device: each row keeps exactly its k largest
// values of the same engine's full row (the pooling is deterministic, so the same values), in index
// order, ties at the k-th kept by lowest index; rows without a k keep every non-zero; three passes
// (eager, capture, replay: the compaction runs outside the graph with the k staged per batch).
TEST(SparseGpuTopK, KeepsTheLargestValuesOfTheFullRow) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  auto m = LoadClassifyManifest();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == "bert-splade") fx = f;
  }
  auto golden = LoadClassifyGolden("bert-splade");
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto dir = BuildClassifyFolder(*m, fx, *golden);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  CudaEngineOptions opts;
  opts.max_tokens = 2048;
  opts.max_seqs = 32;
  auto engine = CreateCudaEngine(*dir, opts);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Batch b = TextsBatch(golden->cases, 2);
  auto full = (*engine)->Embed(b);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_TRUE(full->sparse());
  for (int s = 0; s < b.num_seqs(); ++s) b.sparse_top_k.push_back(s % 4 == 3 ? 0 : 1 + 17 * s);
  for (int pass = 0; pass < 3; ++pass) {
    auto top = (*engine)->Embed(b);
    ASSERT_TRUE(top.ok()) << top.status().ToString();
    ASSERT_TRUE(top->sparse());
    for (int i = 0; i < b.num_seqs(); ++i) {
      std::vector<std::pair<float, int32_t>> entries;  // (value, -index): largest first, then low
      for (int64_t e = full->sparse_offsets[i]; e < full->sparse_offsets[i + 1]; ++e)
        entries.emplace_back(full->sparse_values[e], -full->sparse_indices[e]);
      std::sort(entries.rbegin(), entries.rend());
      const int k = b.sparse_top_k[i];
      if (k > 0 && static_cast<int>(entries.size()) > k) entries.resize(k);
      std::vector<std::pair<int32_t, float>> want;
      for (const auto& [v, neg] : entries) want.emplace_back(-neg, v);
      std::sort(want.begin(), want.end());
      std::vector<std::pair<int32_t, float>> got;
      for (int64_t e = top->sparse_offsets[i]; e < top->sparse_offsets[i + 1]; ++e)
        got.emplace_back(top->sparse_indices[e], top->sparse_values[e]);
      EXPECT_EQ(got, want) << "pass " << pass << " row " << i << " k " << k;
    }
  }
}

}  // namespace
}  // namespace petal::testing
