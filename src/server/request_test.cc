// Request validation for ranking models (server/request.h): the pairs' token types travel and are
// checked, a ranking model's response format is its float32 logits, and embedding options are
// refused for it; every message starts with the offending field (gRPC INVALID_ARGUMENT).
#include "server/request.h"

#include <gtest/gtest.h>

#include "wire/messages.h"

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

}  // namespace
}  // namespace petal::server
