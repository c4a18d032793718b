#include "model/config.h"

#include <gtest/gtest.h>

namespace petal {
namespace {

TEST(ConfigTest, ParsesBert) {
  auto c = ParseModelConfig(R"({"architectures":["BertModel"],"model_type":"bert","hidden_size":384,
    "num_hidden_layers":6,"num_attention_heads":12,"intermediate_size":1536,"vocab_size":30522,
    "max_position_embeddings":512,"type_vocab_size":2,"layer_norm_eps":1e-12,"hidden_act":"gelu"})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kBert);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->num_kv_heads, 12);
  EXPECT_EQ(c->max_seq_length, 512);
}

TEST(ConfigTest, ParsesQwen3) {
  auto c = ParseModelConfig(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3",
    "hidden_size":1024,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,
    "head_dim":128,"intermediate_size":3072,"vocab_size":151669,"max_position_embeddings":32768,
    "rms_norm_eps":1e-6,"rope_theta":1000000,"hidden_act":"silu","is_causal":false})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_EQ(c->mask, AttentionMask::kBidirectional);
  EXPECT_EQ(c->pooling, PoolingMode::kMean);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_NEAR(c->ParameterCount(), 596e6, 5e6);  // Qwen3-0.6B without the LM head
}

TEST(ConfigTest, UnsupportedArchitectureIsNamed) {
  auto c = ParseModelConfig(R"({"model_type":"llama","hidden_size":8})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'llama'"), std::string::npos) << c.status().message();
}

TEST(ConfigTest, MissingFieldIsNamed) {
  auto c = ParseModelConfig(R"({"model_type":"bert","hidden_size":384})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_hidden_layers"), std::string::npos);
}

TEST(ConfigTest, BadGqaRatioFails) {
  auto c = ParseModelConfig(R"({"model_type":"qwen3","hidden_size":64,"num_hidden_layers":1,
    "num_attention_heads":6,"num_key_value_heads":4,"head_dim":16,"intermediate_size":8,
    "vocab_size":10,"max_position_embeddings":10})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_key_value_heads"), std::string::npos);
}

// Regression tests for fuzz_model_config findings (inputs kept in tests/fuzz/corpus/model_config):
// shapes whose products overflowed int (undefined behaviour) and a non-finite epsilon.
std::string Bert(const std::string& extra) {
  return R"({"model_type":"bert","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":2,)"
         R"("intermediate_size":4,"vocab_size":10,"max_position_embeddings":8)" +
         extra + "}";
}

TEST(ConfigTest, HugeHeadProductIsRejectedWithoutOverflow) {
  auto c = ParseModelConfig(Bert(R"(,"head_dim":1073741824)"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden_size must equal"), std::string::npos);
}

TEST(ConfigTest, LargeVocabularySumsDoNotOverflow) {
  auto c = ParseModelConfig(
      R"({"model_type":"bert","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":2,)"
      R"("intermediate_size":4,"vocab_size":1073741824,"max_position_embeddings":1073741824,)"
      R"("type_vocab_size":1073741824})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GT(c->ParameterCount(), int64_t{3} * (1 << 30) * 64);
}

TEST(ConfigTest, ImplausiblyLargeShapesAreRejected) {
  // About 2^77 parameters: ParameterCount would overflow int64.
  auto c =
      ParseModelConfig(R"({"model_type":"bert","hidden_size":65536,"num_hidden_layers":1073741824,)"
                       R"("num_attention_heads":2,"intermediate_size":1073741824,"vocab_size":10,)"
                       R"("max_position_embeddings":8})");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("parameters"), std::string::npos) << c.status().message();
}

TEST(ConfigTest, NonFiniteEpsilonIsRejected) {
  EXPECT_FALSE(ParseModelConfig(Bert(R"(,"layer_norm_eps":1e300)")).ok());
  EXPECT_FALSE(ParseModelConfig(Bert(R"(,"layer_norm_eps":-1)")).ok());
  EXPECT_TRUE(ParseModelConfig(Bert(R"(,"layer_norm_eps":1e-5)")).ok());
}

}  // namespace
}  // namespace petal
