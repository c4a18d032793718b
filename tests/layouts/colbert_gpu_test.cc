// The CUDA engine (bf16) on the multi-vector fixtures (tests/fixtures/colbert/) against the float64
// numpy reference (scripts/ref/colbert_numpy.py): queries and documents in one ragged batch, with
// each attention backend asked for (flash, cudnn: bert-colbert's key lengths always run on
// flash; bert-colbert-attend passes none, so cudnn runs it), eager then replayed (a second pass of
// the same buckets). Token vectors cosine >= 0.999, MaxSim within 5e-3 relative, and the same best
// document per query wherever the reference's two best differ by more than twice that. Label gpu.
// Thread-safety: single-threaded test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "colbert_fixture.h"
#include "engine/cuda/cuda_engine.h"
#include "gateway/multivector.h"
#include "model/config.h"

namespace petal::testing {
namespace {

constexpr double kMinCosine = 0.999;
constexpr double kMaxSimRel = 5e-3;

class ColbertGpuTest : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(ColbertGpuTest, CudaTokenVectorsMatchTheReference) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string name = std::get<0>(GetParam()), backend = std::get<1>(GetParam());
  const ColbertGolden g = LoadColbertGolden(name);
  const std::string dir = BuildColbertFolder(name, g);
  std::vector<const ColbertSeq*> all;
  for (const ColbertSeq& q : g.queries) all.push_back(&q);
  for (const ColbertSeq& d : g.documents) all.push_back(&d);
  Batch batch;
  for (const ColbertSeq* s : all) batch.Add(s->ids);

  CudaEngineOptions opts;
  opts.max_tokens = 2048;
  opts.max_seqs = 16;
  opts.attention = backend;
  auto engine = CreateCudaEngine(dir, opts);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_EQ((*engine)->config().task, ModelTask::kMultiVector);
  for (int pass = 0; pass < 2; ++pass) {
    auto out = (*engine)->Embed(batch);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->rows, batch.num_tokens());
    const size_t dim = static_cast<size_t>(out->dim);
    double worst = 1;
    std::vector<std::vector<float>> kept(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      size_t k = 0;
      for (size_t t = 0; t < all[i]->ids.size(); ++t) {
        if (!all[i]->keep[t]) continue;
        const float* row = out->row(batch.cu_seqlens[i] + static_cast<int>(t));
        const auto& ref = all[i]->vecs[k++];
        double ab = 0, aa = 0, bb = 0;
        for (size_t j = 0; j < dim; ++j)
          ab += row[j] * ref[j], aa += double{row[j]} * row[j], bb += ref[j] * ref[j];
        worst = std::min(worst, ab / std::sqrt(aa * bb));
        kept[i].insert(kept[i].end(), row, row + dim);
      }
    }
    EXPECT_GE(worst, kMinCosine) << name << " " << backend << " pass " << pass;
    double worst_rel = 0;
    const size_t nq = g.queries.size();
    for (size_t q = 0; q < nq; ++q) {
      std::vector<double> got;
      for (size_t d = 0; d < g.documents.size(); ++d) {
        const auto& a = kept[q];
        const auto& b = kept[nq + d];
        got.push_back(gateway::MaxSim(a.data(), a.size() / dim, b.data(), b.size() / dim, dim));
        const double rel = std::abs(got.back() - g.maxsim[q][d]) / std::abs(g.maxsim[q][d]);
        worst_rel = std::max(worst_rel, rel);
        EXPECT_LE(rel, kMaxSimRel) << "query " << q << " document " << d;
      }
      std::vector<double> ref = g.maxsim[q];
      std::vector<double> sorted = ref;
      std::sort(sorted.rbegin(), sorted.rend());
      if (sorted[0] - sorted[1] > 2 * kMaxSimRel * sorted[0]) {
        EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
                  std::max_element(ref.begin(), ref.end()) - ref.begin())
            << "query " << q << ": a different best document";
      }
    }
    std::printf("%s %s pass %d: worst token cosine 1 - %.3g, worst MaxSim rel error %.3g\n",
                name.c_str(), backend.c_str(), pass, 1 - worst, worst_rel);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ColbertGpuTest,
                         ::testing::Combine(::testing::Values("bert-colbert",
                                                              "bert-colbert-attend"),
                                            ::testing::Values("flash", "cudnn")),
                         [](const auto& info) {
                           std::string s =
                               std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace petal::testing
