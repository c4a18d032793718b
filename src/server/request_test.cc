// JobFromRequest: what INT8 means per model (issue 16): linear int8 for most models, the
// model's own round(127 tanh(x)) for pplx-embed-v1 (int8_mode tanh), INT8_TANH by name anywhere.
#include "server/request.h"

#include <gtest/gtest.h>

#include <cstring>

namespace petal::server {
namespace {

v1::EmbedRequest OneSequence(v1::DType dtype) {
  v1::EmbedRequest req;
  req.set_request_id("r");
  req.mutable_options()->set_dtype(dtype);
  const int32_t ids[3] = {5, 9, 2};
  req.set_token_ids(std::string(reinterpret_cast<const char*>(ids), sizeof(ids)));
  req.add_lengths(3);
  return req;
}

ModelConfig Config(Int8Mode mode) {
  ModelConfig c;
  c.hidden_size = 16;
  c.vocab_size = 32;
  c.max_position_embeddings = 64;
  c.int8_mode = mode;
  return c;
}

TEST(JobFromRequest, Int8FollowsTheModelsInt8Mode) {
  auto linear = JobFromRequest(OneSequence(v1::DTYPE_INT8), Config(Int8Mode::kLinear));
  ASSERT_TRUE(linear.ok()) << linear.status().ToString();
  EXPECT_EQ(linear->format.dtype, wire::OutputDType::kInt8);
  auto tanh = JobFromRequest(OneSequence(v1::DTYPE_INT8), Config(Int8Mode::kTanh));
  ASSERT_TRUE(tanh.ok()) << tanh.status().ToString();
  EXPECT_EQ(tanh->format.dtype, wire::OutputDType::kInt8Tanh);
  // By name, on a linear model too; other types are unchanged on a tanh model.
  auto named = JobFromRequest(OneSequence(v1::DTYPE_INT8_TANH), Config(Int8Mode::kLinear));
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->format.dtype, wire::OutputDType::kInt8Tanh);
  auto binary = JobFromRequest(OneSequence(v1::DTYPE_BINARY), Config(Int8Mode::kTanh));
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(binary->format.dtype, wire::OutputDType::kBinary);
}

}  // namespace
}  // namespace petal::server
