// Ranking-model configs: which classes and folders are ranking models, and the refusals (each
// message names the file, the key and the value).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/config.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

std::string Bert(const std::string& arch, const std::string& extra,
                 const std::string& type = "bert") {
  return R"({"architectures":[")" + arch + R"("],"model_type":")" + type +
         R"(","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":2,)"
         R"("intermediate_size":4,"vocab_size":10,"max_position_embeddings":8)" +
         extra + "}";
}

TEST(RerankConfig, SequenceClassifiersAreCrossEncoders) {
  auto c = ParseModelConfig(Bert("BertForSequenceClassification", R"(,"num_labels":1)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kScore);
  EXPECT_EQ(c->score_head, ScoreHead::kBertPooler);
  EXPECT_EQ(c->score_outputs, 1);
  EXPECT_EQ(c->OutputDim(), 1);
  EXPECT_EQ(c->score_activation, ScoreActivation::kSigmoid);
  auto x = ParseModelConfig(
      Bert("XLMRobertaForSequenceClassification", R"(,"id2label":{"0":"LABEL_0"})", "xlm-roberta"));
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->score_head, ScoreHead::kRobertaClassifier);
  auto e = ParseModelConfig(Bert("BertModel", ""));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->task, ModelTask::kEmbed);
  EXPECT_EQ(e->OutputDim(), 64);
}

TEST(RerankConfig, ActivationsAsSentenceTransformersStoresThem) {
  auto legacy = ParseModelConfig(Bert(
      "BertForSequenceClassification",
      R"(,"num_labels":1,"sbert_ce_default_activation_function":"torch.nn.modules.linear.Identity")"));
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(legacy->score_activation, ScoreActivation::kIdentity);
  auto v4 = ParseModelConfig(Bert(
      "BertForSequenceClassification",
      R"(,"num_labels":1,"sentence_transformers":{"activation_fn":"torch.nn.modules.activation.Sigmoid"})"));
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ(v4->score_activation, ScoreActivation::kSigmoid);
  auto bad = ParseModelConfig(Bert(
      "BertForSequenceClassification",
      R"(,"num_labels":1,"sentence_transformers":{"activation_fn":"torch.nn.modules.activation.Tanh"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config.json: key 'sentence_transformers'"),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("torch.nn.modules.activation.Tanh"), std::string::npos);
}

// More than one label is a sequence classifier (classify_config_test.cc), not a ranking model;
// other task heads stay refused.
TEST(RerankConfig, MoreThanOneLabelIsAClassifierNotARanker) {
  auto c = ParseModelConfig(Bert("BertForSequenceClassification", R"(,"num_labels":3)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kClassify);
  auto t = ParseModelConfig(Bert("BertForTokenClassification", ""));
  ASSERT_FALSE(t.ok());
}

class RerankFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("petal_rerank_cfg_" + std::to_string(::getpid()) + "/Qwen3-Reranker-0.6B"))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("config.json",
          R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,)"
          R"("num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,)"
          R"("intermediate_size":8,"vocab_size":20,"max_position_embeddings":64,)"
          R"("tie_word_embeddings":true})");
    Write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"no":4,"yes":7,"x":1}}})");
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }
  void Write(const std::string& name, const std::string& text) {
    fs::create_directories(fs::path(dir_ + "/" + name).parent_path());
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(RerankFolder, QwenFolderNamedRerankerIsAnLmReranker) {
  auto c = LoadModelConfig(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kScore);
  EXPECT_EQ(c->score_head, ScoreHead::kLmYesNo);
  EXPECT_EQ(c->score_outputs, 2);
  EXPECT_EQ(c->yes_token_id, 7);
  EXPECT_EQ(c->no_token_id, 4);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->pooling, PoolingMode::kLastToken);
  EXPECT_EQ(c->task_source, "folder name contains 'reranker'");
}

TEST_F(RerankFolder, ExplicitTaskWinsAndAmbiguityIsRefused) {
  Write("petal_config.json", R"({"task":"embed"})");
  auto e = LoadModelConfig(dir_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->task, ModelTask::kEmbed);
  // A name that says reranker beside a sentence-transformers Pooling module: ask, do not guess.
  fs::remove(dir_ + "/petal_config.json");
  Write(
      "modules.json",
      R"([{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}])");
  Write("1_Pooling/config.json", R"({"pooling_mode_lasttoken":true})");
  auto a = LoadModelConfig(dir_);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("set \"task\""), std::string::npos) << a.status().message();
  Write("petal_config.json", R"({"task":"score"})");
  auto s = LoadModelConfig(dir_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->task, ModelTask::kScore);
  Write("petal_config.json", R"({"task":"classify"})");
  auto bad = LoadModelConfig(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'task' = \"classify\" is for BERT / XLM-R"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(RerankFolder, RerankerWithoutItsTokensIsRefused) {
  Write("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"x":1}}})");
  auto c = LoadModelConfig(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no token 'yes'"), std::string::npos) << c.status().message();
}

TEST_F(RerankFolder, ScoreTaskOnABertEmbedderIsRefused) {
  Write("config.json", Bert("BertModel", ""));
  Write("petal_config.json", R"({"task":"score"})");
  auto c = LoadModelConfig(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("has no classification head"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace petal
