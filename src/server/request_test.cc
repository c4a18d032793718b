// Request validation for ranking models (server/request.h): the pairs' token types travel and are
// checked, a ranking model's response format is its float32 logits, and embedding options are
// refused for it; every message starts with the offending field (gRPC INVALID_ARGUMENT); a sparse
// model's sparse rows.
#include "server/request.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "server/row_output.h"
#include "wire/messages.h"
#include "wire/sparse_rows.h"

namespace petal::server {
namespace {

ModelConfig CrossEncoder() {
  auto c = ParseModelConfig(
      R"({"architectures":["BertForSequenceClassification"],"model_type":"bert","hidden_size":64,)"
      R"("num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":4,"vocab_size":100,)"
      R"("max_position_embeddings":16,"type_vocab_size":2,"num_labels":1})");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(RequestTest, PairsWithTokenTypesBecomeAScoreJob) {
  const ModelConfig c = CrossEncoder();
  auto req = wire::MakeEmbedRequest({{1, 2, 3}, {4, 5}}, {{0, 0, 1}, {0, 1}});
  auto job = JobFromRequest(req, c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->token_type_ids, (std::vector<int32_t>{0, 0, 1, 0, 1}));
  EXPECT_EQ(job->format.dims, 1);
  EXPECT_FALSE(job->format.normalize);
  EXPECT_EQ(job->format.dtype, wire::OutputDType::kFloat32);
  // Without types: all zero (empty).
  auto plain = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}), c);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->token_type_ids.empty());
}

TEST(RequestTest, BadTokenTypesAndEmbeddingOptionsAreRefused) {
  const ModelConfig c = CrossEncoder();
  auto req = wire::MakeEmbedRequest({{1, 2, 3}}, {{0, 2, 1}});
  auto bad_type = JobFromRequest(req, c);
  ASSERT_FALSE(bad_type.ok());
  EXPECT_EQ(bad_type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_type.status().message().rfind("token_type_ids[1]: 2 is outside [0, 2)", 0), 0u)
      << bad_type.status().message();
  req = wire::MakeEmbedRequest({{1, 2, 3}});
  req.set_token_type_ids(std::string(8, '\0'));
  auto short_types = JobFromRequest(req, c);
  ASSERT_FALSE(short_types.ok());
  EXPECT_EQ(short_types.status().message().rfind("token_type_ids: 2 ids for 3 tokens", 0), 0u)
      << short_types.status().message();
  v1::EmbedOptions o;
  o.set_dimensions(1);
  auto dims = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), c);
  ASSERT_FALSE(dims.ok());
  EXPECT_EQ(dims.status().message().rfind("options: this model is a ranking model", 0), 0u)
      << dims.status().message();
  o.Clear();
  o.set_dtype(v1::DTYPE_INT8);
  EXPECT_FALSE(JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), c).ok());
}

// A sequence classifier (num_labels > 1): its job's rows are its num_labels float32 logits, and
// embedding options or pooling spans are refused naming what the model is.
TEST(RequestTest, AClassifiersJobIsItsLabelsLogits) {
  auto c = ParseModelConfig(
      R"({"architectures":["BertForSequenceClassification"],"model_type":"bert","hidden_size":64,)"
      R"("num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":4,"vocab_size":100,)"
      R"("max_position_embeddings":16,"type_vocab_size":2,"id2label":{"0":"a","1":"b","2":"c"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto job = JobFromRequest(wire::MakeEmbedRequest({{7, 3, 9}, {4, 5}}), *c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->format.dims, 3);
  EXPECT_FALSE(job->format.normalize);
  EXPECT_EQ(job->format.dtype, wire::OutputDType::kFloat32);
  v1::EmbedOptions o;
  o.set_normalize(v1::NORMALIZE_TRUE);
  auto norm = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), *c);
  ASSERT_FALSE(norm.ok());
  EXPECT_EQ(norm.status().message().rfind("options: this model is a sequence classifier", 0), 0u)
      << norm.status().message();
  auto req = wire::MakeEmbedRequest({{1, 2, 3}});
  req.add_span_counts(1);
  req.add_spans(0);
  req.add_spans(2);
  auto spans = JobFromRequest(req, *c);
  ASSERT_FALSE(spans.ok());
  EXPECT_EQ(spans.status().message().rfind("span_counts: pooling spans are for embedding", 0), 0u)
      << spans.status().message();
}

// What INT8 means per model (issue 16): linear int8 for most models, the model's own
// round(127 tanh(x)) for pplx-embed-v1 (int8_mode tanh), INT8_TANH by name anywhere.

v1::EmbedRequest OneSequenceInt8(v1::DType dtype) {
  v1::EmbedRequest req;
  req.set_request_id("r");
  req.mutable_options()->set_dtype(dtype);
  const int32_t ids[3] = {5, 9, 2};
  req.set_token_ids(std::string(reinterpret_cast<const char*>(ids), sizeof(ids)));
  req.add_lengths(3);
  return req;
}

ModelConfig Int8Config(Int8Mode mode) {
  ModelConfig c;
  c.hidden_size = 16;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  c.int8_mode = mode;
  return c;
}

TEST(JobFromRequest, Int8FollowsTheModelsInt8Mode) {
  auto linear = JobFromRequest(OneSequenceInt8(v1::DTYPE_INT8), Int8Config(Int8Mode::kLinear));
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  EXPECT_EQ(linear->format.dtype, wire::OutputDType::kInt8);
  auto tanh = JobFromRequest(OneSequenceInt8(v1::DTYPE_INT8), Int8Config(Int8Mode::kTanh));
  ASSERT_TRUE(tanh.ok()) << tanh.status().ToString();
  EXPECT_EQ(tanh->format.dtype, wire::OutputDType::kInt8Tanh);
  // By name, on a linear model too; other types are unchanged on a tanh model.
  auto named = JobFromRequest(OneSequenceInt8(v1::DTYPE_INT8_TANH), Int8Config(Int8Mode::kLinear));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->format.dtype, wire::OutputDType::kInt8Tanh);
  auto binary = JobFromRequest(OneSequenceInt8(v1::DTYPE_BINARY), Int8Config(Int8Mode::kTanh));
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(binary->format.dtype, wire::OutputDType::kBinary);
}

// Pooling spans (late chunking): one row per span; counts, bounds and ranking models checked,
// NORMALIZE_FALSE allowed for spans on a normalising model (raw span means), and DEFAULT makes
// the codec normalise span rows (the engine returns them raw).
TEST(JobFromRequest, PoolingSpans) {
  ModelConfig c = Int8Config(Int8Mode::kLinear);
  c.normalize = true;
  c.pooling = PoolingMode::kLastToken;
  auto req = wire::MakeEmbedRequest({{1, 2, 3, 4}, {5, 6}});
  for (uint32_t v : {2u, 1u}) req.add_span_counts(v);
  for (uint32_t v : {0u, 2u, 2u, 4u, 0u, 2u}) req.add_spans(v);
  auto job = JobFromRequest(req, c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->num_rows(), 3);
  EXPECT_EQ(job->cu_spans, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(job->spans, (std::vector<int32_t>{0, 2, 0, 2, 4, 0, 0, 2, 0}));
  EXPECT_TRUE(job->format.normalize);
  req.set_span_pooling(v1::SPAN_POOLING_MODEL);
  job = JobFromRequest(req, c);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spans[2], 2);  // last token
  req.mutable_options()->set_normalize(v1::NORMALIZE_FALSE);
  job = JobFromRequest(req, c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_FALSE(job->format.normalize);

  auto expect_error = [&](v1::EmbedRequest r, const std::string& field) {
    auto j = JobFromRequest(r, c);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().message().rfind(field, 0), 0u) << j.status().message();
  };
  auto bad = req;
  bad.set_spans(5, 3);  // [2, 3) of a 2-token sequence
  expect_error(bad, "spans[4]");
  bad = req;
  bad.set_spans(1, 0);  // empty
  expect_error(bad, "spans[0]");
  bad = req;
  bad.set_span_counts(1, 0);
  expect_error(bad, "span_counts[1]");
  bad = req;
  bad.add_span_counts(1);
  expect_error(bad, "span_counts");
  bad = req;
  bad.add_spans(1);
  expect_error(bad, "spans");
  auto ranking = wire::MakeEmbedRequest({{1, 2}});
  ranking.add_span_counts(1);
  ranking.add_spans(0);
  ranking.add_spans(2);
  auto refused = JobFromRequest(ranking, CrossEncoder());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("span_counts", 0), 0u);
}

}  // namespace
}  // namespace petal::server

namespace petal::server {
namespace {

// A multi-vector (ColBERT) model's job: one row per token, any dtype, full dimensions only.
TEST(JobFromRequest, MultiVectorJobsHaveOneRowPerToken) {
  ModelConfig c = CrossEncoder();
  c.task = ModelTask::kMultiVector;
  c.score_head = ScoreHead::kNone;
  c.score_outputs = 24;
  auto job = JobFromRequest(wire::MakeEmbedRequest({{1, 2, 3}, {4, 5}}), c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->per_token);
  EXPECT_EQ(job->num_rows(), 5);
  EXPECT_EQ(job->rows_of(0), 3);
  EXPECT_EQ(job->first_row(1), 3);
  EXPECT_EQ(job->format.dims, 24);
  EXPECT_FALSE(job->format.normalize);
  v1::EmbedOptions o;
  o.set_dtype(v1::DTYPE_BINARY);
  auto binary = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), c);
  ASSERT_TRUE(binary.ok()) << binary.status().ToString();
  EXPECT_EQ(binary->format.dtype, wire::OutputDType::kBinary);
  o.Clear();
  o.set_dimensions(8);
  auto dims = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), c);
  ASSERT_FALSE(dims.ok());
  EXPECT_EQ(dims.status().message().rfind("options: this model is a multi-vector", 0), 0u)
      << dims.status().message();
  o.Clear();
  o.set_normalize(v1::NORMALIZE_FALSE);
  EXPECT_FALSE(JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), c).ok());
}

// A SPLADE model's config: the cross-encoder's encoder with the MLM head over its vocabulary.
ModelConfig SpladeModel() {
  ModelConfig c = CrossEncoder();
  c.task = ModelTask::kSparse;
  c.score_head = ScoreHead::kBertMlmSplade;
  c.score_outputs = c.vocab_size;
  return c;
}

// max_active_dims: a sparse model's option (clamped to the vocabulary, as SparseEncoder does);
// refused for others, naming the field.
TEST(JobFromRequest, MaxActiveDimsIsForSparseModels) {
  const ModelConfig c = SpladeModel();
  v1::EmbedOptions o;
  o.set_sparse(true);
  o.set_max_active_dims(7);
  auto job = JobFromRequest(wire::MakeEmbedRequest({{1, 2, 3}}, o), c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->max_active_dims, 7);
  o.set_max_active_dims(1u << 30);
  job = JobFromRequest(wire::MakeEmbedRequest({{1, 2, 3}}, o), c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->max_active_dims, c.vocab_size);
  o.set_sparse(false);
  auto other = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), CrossEncoder());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message().rfind("options.max_active_dims: only sparse", 0), 0u)
      << other.status().message();
}

// A sparse (SPLADE) model's job may ask for sparse rows (another model may not), and its answer
// then carries the non-zero entries only: the same entries DecodeSparseRows reads from dense rows.
TEST(JobFromRequest, SparseRowsAreForSparseModelsAndCarryOnlyTheNonZeros) {
  const ModelConfig c = SpladeModel();
  v1::EmbedOptions o;
  o.set_sparse(true);
  auto job = JobFromRequest(wire::MakeEmbedRequest({{1, 2, 3}, {4, 5}}, o), c);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->format.sparse);
  EXPECT_EQ(job->format.dims, c.vocab_size);
  auto dense = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}), c);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_FALSE(dense->format.sparse);
  auto embedder = JobFromRequest(wire::MakeEmbedRequest({{1, 2}}, o), CrossEncoder());
  ASSERT_FALSE(embedder.ok());
  EXPECT_EQ(embedder.status().message().rfind("options.sparse: only sparse", 0), 0u)
      << embedder.status().message();

  std::vector<float> rows(2 * c.vocab_size, 0.0f);
  rows[7] = 1.25f;
  rows[c.vocab_size + 3] = 0.5f;
  rows[c.vocab_size + 99] = -2.0f;
  // The engines' sparse form and dense rows (an engine that answers those) give the same answer,
  // rows stored out of order as a batch may complete them.
  Embeddings dense_rows;
  dense_rows.rows = 2;
  dense_rows.dim = c.vocab_size;
  dense_rows.data = rows;
  const Embeddings sparse = Embeddings::SparseFromDense(rows.data(), 2, c.vocab_size, nullptr);
  ASSERT_TRUE(sparse.sparse());
  for (const Embeddings* out : {static_cast<const Embeddings*>(&dense_rows), &sparse}) {
    EmbedResult result;
    result.format = job->format;
    SizeResult(2, &result);
    StoreRow(*out, 1, 1, &result);
    StoreRow(*out, 0, 0, &result);
    v1::EmbedResponse resp;
    FillResponse("r", &result, &resp);
    EXPECT_TRUE(resp.data().empty());
    EXPECT_EQ(resp.sparse_counts_size(), 2);
    EXPECT_EQ(resp.sparse_indices().size(), 8u);
    auto got = wire::DecodeSparseRows(resp, 2);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ((*got)[0].indices, std::vector<int32_t>{7});
    EXPECT_EQ((*got)[0].values, std::vector<float>{1.25f});
    EXPECT_EQ((*got)[1].indices, std::vector<int32_t>{3});
    EXPECT_EQ((*got)[1].values, std::vector<float>{0.5f});
  }
}

// StoreRows copies float32 rows that need no change at once, and falls back to StoreRow (here:
// normalisation) otherwise; both land where the row loop would put them.
TEST(RowOutput, StoreRowsMatchesStoreRowOneByOne) {
  Embeddings out;
  out.rows = 5;
  out.dim = 3;
  for (int i = 0; i < 15; ++i) out.data.push_back(0.25f * static_cast<float>(i + 1));
  for (bool normalize : {false, true}) {
    EmbedResult bulk, one;
    for (EmbedResult* r : {&bulk, &one}) {
      r->format.dims = 3;
      r->format.normalize = normalize;
      SizeResult(6, r);
      std::memset(r->data.data(), 0x7f, r->data.size());  // poison: every row must be written
    }
    StoreRows(out, 1, 2, 4, &bulk);
    for (int k = 0; k < 4; ++k) StoreRow(out, 1 + k, 2 + k, &one);
    EXPECT_EQ(bulk.data, one.data) << "normalize " << normalize;
    float first;
    std::memcpy(&first, bulk.data.data() + 2 * 12, 4);
    EXPECT_FLOAT_EQ(first, normalize ? 1.0f / std::sqrt(1.0f + 1.5625f + 2.25f) : 1.0f);
  }
}

}  // namespace
}  // namespace petal::server
