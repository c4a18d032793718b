// Multi-vector (ColBERT / PyLate) folders: PyLate's defaults, token ids through the tokenizer
// (prefixes as added tokens, a Unigram vocabulary, the mask token from tokenizer_config.json,
// skiplist words outside the vocabulary mapped to the unknown token), Dense chains, and the
// folder rules (Dense after Pooling, petal_config.json 'task'). The fixtures' numerics are
// tests/layouts/colbert_test.cc. Thread-safety: single-threaded tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/config.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfig =
    R"({"architectures":["BertModel"],"model_type":"bert","hidden_size":8,)"
    R"("num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":4,"vocab_size":12,)"
    R"("max_position_embeddings":64})";
// WordPiece: "[Q] " / "[D] " are added tokens (as PyLate saves them), "." is in the vocabulary.
constexpr const char* kWordPiece =
    R"({"added_tokens":[{"id":0,"content":"[PAD]"},{"id":1,"content":"[UNK]"},)"
    R"({"id":2,"content":"[CLS]"},{"id":3,"content":"[SEP]"},{"id":4,"content":"[MASK]"},)"
    R"({"id":10,"content":"[Q] "},{"id":11,"content":"[D] "}],)"
    R"("model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,)"
    R"("[SEP]":3,"[MASK]":4,".":5,",":6,"a":7,"b":8,"c":9}}})";
// Unigram (XLM-R style): ids are vocabulary positions, unk_id names the unknown token.
constexpr const char* kUnigram =
    R"({"added_tokens":[{"id":0,"content":"<s>"},{"id":3,"content":"<unk>"},)"
    R"({"id":9,"content":"<mask>"}],)"
    R"("model":{"type":"Unigram","unk_id":3,"vocab":[["<s>",0],["<pad>",0],["</s>",0],)"
    R"(["<unk>",0],[".",-1],["?",-1],["[Q]",-2],["[D]",-2],["x",-3],["<mask>",0]]}})";

class MultiVectorFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("petal_mv_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "1_Dense");
    Write("config.json", kConfig);
    Write("tokenizer.json", kWordPiece);
    Write("modules.json", R"([{"path":"","type":"sentence_transformers.models.Transformer"},)"
                          R"({"path":"1_Dense","type":"pylate.models.Dense.Dense"}])");
    Write("1_Dense/config.json", R"({"in_features":8,"out_features":4,"bias":false,)"
                                 R"("activation_function":"torch.nn.modules.linear.Identity"})");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  StatusOr<ModelConfig> Load() { return LoadModelConfig(dir_.string()); }
  fs::path dir_;
};

TEST_F(MultiVectorFolder, PyLateDefaultsAndAddedPrefixTokens) {
  auto c = Load();  // no config_sentence_transformers.json: PyLate's defaults
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kMultiVector);
  EXPECT_STREQ(ModelTaskName(c->task), "multivector");
  EXPECT_EQ(c->OutputDim(), 4);
  const MultiVectorConfig& mv = c->multivector;
  EXPECT_EQ(mv.query_prefix_id, 10);
  EXPECT_EQ(mv.document_prefix_id, 11);
  EXPECT_EQ(mv.mask_token_id, 4);
  EXPECT_EQ(mv.query_length, 32);
  EXPECT_EQ(mv.document_length, 64);  // PyLate's 180, cut to the encoder's positions
  EXPECT_TRUE(mv.do_query_expansion);
  EXPECT_FALSE(mv.attend_to_expansion_tokens);
  // string.punctuation: "." and "," are in the vocabulary; the other 30 map to [UNK].
  EXPECT_EQ(mv.skiplist_ids, (std::vector<int32_t>{1, 5, 6}));
  ASSERT_EQ(mv.dense.size(), 1u);
  EXPECT_EQ(mv.dense[0].path, "1_Dense");
  EXPECT_FALSE(mv.dense[0].bias);
}

TEST_F(MultiVectorFolder, DocumentLengthBeyondThePositionsIsRefused) {
  Write("config_sentence_transformers.json", R"({"document_length": 100})");
  auto d = Load();  // 64 positions
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("key 'document_length' = 100"), std::string::npos)
      << d.status().message();
}

TEST_F(MultiVectorFolder, UnigramVocabularyChainsAndTokenizerConfigMask) {
  Write("tokenizer.json", kUnigram);
  Write("tokenizer_config.json", R"({"mask_token": {"content": "<mask>"}})");
  Write("config_sentence_transformers.json",
        R"({"query_prefix":"[Q]","document_prefix":"","query_length":16,"document_length":48,)"
        R"("do_query_expansion":false,"attend_to_expansion_tokens":true,)"
        R"("skiplist_words":["?","zz"]})");
  Write("modules.json", R"([{"path":"","type":"sentence_transformers.models.Transformer"},)"
                        R"({"path":"1_Dense","type":"sentence_transformers.models.Dense"},)"
                        R"({"path":"2_Dense","type":"sentence_transformers.models.Dense"}])");
  fs::create_directories(dir_ / "2_Dense");
  Write("2_Dense/config.json", R"({"in_features":4,"out_features":2})");
  auto c = Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const MultiVectorConfig& mv = c->multivector;
  EXPECT_EQ(mv.query_prefix_id, 6);
  EXPECT_EQ(mv.document_prefix_id, -1);
  EXPECT_EQ(mv.mask_token_id, 9);
  EXPECT_FALSE(mv.attend_to_expansion_tokens);  // forced off without expansion, as PyLate
  EXPECT_EQ(mv.skiplist_ids, (std::vector<int32_t>{3, 5}));  // "zz" -> <unk>
  ASSERT_EQ(mv.dense.size(), 2u);
  EXPECT_TRUE(mv.dense[1].bias);  // nn.Linear's default
  EXPECT_EQ(c->OutputDim(), 2);
}

TEST_F(MultiVectorFolder, FolderRulesAreRefused) {
  Write("petal_config.json", R"({"task": "embed"})");
  auto c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("key 'task'"), std::string::npos) << c.status().message();
  fs::remove(dir_ / "petal_config.json");
  Write("config_sentence_transformers.json", R"({"do_query_expansion": "yes"})");
  c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("do_query_expansion"), std::string::npos)
      << c.status().message();
  Write("config_sentence_transformers.json", R"({"model_type": "SparseEncoder"})");
  c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("key 'model_type'"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace petal
