// Late chunking against HF transformers (tests/fixtures/late_chunk/golden.json, written by
// scripts/gpu/golden_late_chunk.py): the gateway's planner (span_plan.h) must build exactly the
// joined sequence and spans the golden ran, and an engine given those pooling spans must return
// the golden's chunk vectors (mean of each chunk's final states, L2-normalised). All documents of
// a model run in one ragged batch, so spans must also stay inside their own sequence.
// Tolerances: CPU fp32 cosine >= 0.99999 per chunk; the CUDA engine (bf16, built as
// late_chunk_gpu_test with PETAL_LATE_CHUNK_GPU) >= 0.999. The log shows how far each model's
// late-chunk vectors are from embedding each chunk alone (the golden's alone_cosine).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "gateway/span_plan.h"
#include "wire/codec.h"
#ifdef PETAL_LATE_CHUNK_GPU
#include "engine/cuda/cuda_engine.h"
#endif

namespace petal {
namespace {

using gateway::PlanLateChunks;
using gateway::SpanPlan;

#ifdef PETAL_LATE_CHUNK_GPU
constexpr double kMinCosine = 0.999;
#else
constexpr double kMinCosine = 0.99999;
#endif

std::string Source(const std::string& rel) {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return JoinPath(s ? s : ".", rel);
}

std::vector<int32_t> Ints(simdjson::dom::array a) {
  std::vector<int32_t> v;
  for (auto x : a) v.push_back(static_cast<int32_t>(int64_t(x)));
  return v;
}

StatusOr<std::unique_ptr<Engine>> LoadEngine(const std::string& dir) {
#ifdef PETAL_LATE_CHUNK_GPU
  CudaEngineOptions o;
  o.max_tokens = 4096;
  return CreateCudaEngine(dir, o);
#else
  PETAL_ASSIGN_OR_RETURN(auto e, CpuEngine::Load(dir, {.precision = "fp32"}));
  return std::unique_ptr<Engine>(std::move(e));
#endif
}

TEST(LateChunk, MatchesHfOnTheJoinedSequence) {
  simdjson::dom::parser parser;
  simdjson::dom::element golden;
  ASSERT_EQ(parser.load(Source("tests/fixtures/late_chunk/golden.json")).get(golden),
            simdjson::SUCCESS);
  int models_run = 0;
  for (simdjson::dom::element m : golden["models"].get_array()) {
    const std::string name{std::string_view(m["name"])};
    const std::string dir = Source(std::string(std::string_view(m["folder"])));
    if (!FileExists(JoinPath(dir, "model.safetensors"))) {
      std::printf("skipping %s: %s is missing\n", name.c_str(), dir.c_str());
      continue;
    }
    auto engine = LoadEngine(dir);
    ASSERT_TRUE(engine.ok()) << name << ": " << engine.status().ToString();
    const ModelConfig& c = (*engine)->config();
    const bool texts = std::string_view(m["input"]) == "texts";
    std::unique_ptr<Tokenizer> tok;
    std::vector<int32_t> prefix, suffix;
    if (texts) {
      auto t = Tokenizer::FromModelDir(dir);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      tok = std::move(t).value();
      ASSERT_TRUE(gateway::ModelSpecialTokens(*tok, &prefix, &suffix).ok());
    }
    const int max_len = c.max_seq_length > 0 ? c.max_seq_length : c.max_position_embeddings;
    SpanPlan all;
    std::vector<std::vector<float>> want;
    double alone_min = 1, alone_sum = 0;
    int alone_n = 0;
    for (simdjson::dom::element d : m["documents"].get_array()) {
      std::vector<std::vector<int32_t>> chunks;
      if (texts) {
        EncodeOptions eo;
        eo.add_special_tokens = false;
        for (auto ch : d["chunks"].get_array()) {
          auto ids = tok->Encode(std::string_view(ch), eo);
          ASSERT_TRUE(ids.ok());
          chunks.push_back(*ids);
        }
      } else {
        for (auto ch : d["chunk_ids"].get_array()) chunks.push_back(Ints(ch.get_array()));
      }
      SpanPlan p = PlanLateChunks(chunks, {}, prefix, suffix, max_len, max_len / 4);
      ASSERT_EQ(p.seqs.size(), 1u) << name << ": a golden document fits one window";
      EXPECT_EQ(p.seqs[0], Ints(d["ids"].get_array())) << name << ": joined sequence";
      std::vector<uint32_t> spans;
      for (auto s : d["spans"].get_array())
        for (auto v : s.get_array()) spans.push_back(static_cast<uint32_t>(int64_t(v)));
      EXPECT_EQ(p.spans[0], spans) << name;
      all.Append(p);
      for (auto v : d["vectors"].get_array()) {
        std::vector<float> row;
        for (auto x : v.get_array()) row.push_back(static_cast<float>(double(x)));
        want.push_back(std::move(row));
      }
      for (auto a : d["alone_cosine"].get_array()) {
        alone_min = std::min(alone_min, double(a));
        alone_sum += double(a);
        ++alone_n;
      }
    }
    // One ragged batch of every document, spans at absolute offsets, raw means.
    Batch b = Batch::FromSequences(all.seqs);
    for (size_t k = 0; k < all.seqs.size(); ++k)
      for (size_t q = 0; q < all.spans[k].size(); q += 2)
        b.AddSpan(b.cu_seqlens[k] + all.spans[k][q], b.cu_seqlens[k] + all.spans[k][q + 1], 0,
                  false);
    auto out = (*engine)->Embed(b);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->rows, static_cast<int>(all.target.size()));
    auto rows = gateway::CombineSpanRows(all, out->data.data(), out->dim);
    ASSERT_EQ(static_cast<size_t>(all.outputs), want.size());
    double worst = 1;
    for (int i = 0; i < all.outputs; ++i) {
      float* r = rows.data() + static_cast<size_t>(i) * out->dim;
      wire::L2Normalize(r, out->dim);
      ASSERT_EQ(want[i].size(), static_cast<size_t>(out->dim));
      const double cs = wire::CosineSimilarity(r, want[i].data(), out->dim);
      worst = std::min(worst, cs);
      EXPECT_GE(cs, kMinCosine) << name << " chunk " << i;
    }
    std::printf(
        "%s (%s): %d chunks, worst cosine to HF late chunking %.8f (1 - %.1e); "
        "cosine of late-chunk vectors to each chunk embedded alone: min %.4f, mean %.4f\n",
        name.c_str(), (*engine)->backend().c_str(), all.outputs, worst, 1 - worst, alone_min,
        alone_sum / std::max(1, alone_n));
    ++models_run;
  }
  EXPECT_GE(models_run, 2) << "the qwen3-tiny fixtures are committed and must run";
}

}  // namespace
}  // namespace petal
