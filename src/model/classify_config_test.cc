// Sequence-classifier configs (BertForSequenceClassification / XLMRobertaForSequenceClassification
// with num_labels > 1): labels from id2label, the activation from problem_type, the head's
// tensors in the checkpoint table, and the refusals (each naming the file and the key).
// Thread-safety: single-threaded tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/config.h"
#include "model/factory.h"
#include "model/router_folder.h"

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

TEST(ClassifyConfig, LabelsComeFromId2LabelAndSoftmaxIsTheDefault) {
  auto c = ParseModelConfig(Bert("BertForSequenceClassification",
                                 R"(,"id2label":{"1":"neutral","0":"negative","2":"positive"})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kClassify);
  EXPECT_TRUE(c->HasHead());
  EXPECT_EQ(c->score_head, ScoreHead::kBertPooler);
  EXPECT_EQ(c->score_outputs, 3);
  EXPECT_EQ(c->OutputDim(), 3);
  EXPECT_EQ(c->labels, (std::vector<std::string>{"negative", "neutral", "positive"}));
  EXPECT_EQ(c->class_activation, ClassActivation::kSoftmax);
  EXPECT_STREQ(ModelTaskName(c->task), "classify");
  // The head's output rows are num_labels in the checkpoint table.
  bool found = false;
  for (const auto& t : FindFactory(c->architecture).checkpoint_tensors(*c)) {
    if (t.name == "classifier.weight") {
      found = true;
      EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 64}));
    }
  }
  EXPECT_TRUE(found);
}

TEST(ClassifyConfig, MultiLabelIsSigmoidAndMissingNamesAreLabelN) {
  auto c = ParseModelConfig(Bert("XLMRobertaForSequenceClassification",
                                 R"(,"num_labels":3,"problem_type":"multi_label_classification")",
                                 "xlm-roberta"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->score_head, ScoreHead::kRobertaClassifier);
  EXPECT_EQ(c->class_activation, ClassActivation::kSigmoid);
  EXPECT_EQ(c->labels, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  // Neither num_labels nor id2label: transformers' default of two labels.
  auto d = ParseModelConfig(Bert("BertForSequenceClassification", ""));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->score_outputs, 2);
  // One label stays a cross-encoder.
  auto one = ParseModelConfig(Bert("BertForSequenceClassification", R"(,"num_labels":1)"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->task, ModelTask::kScore);
}

TEST(ClassifyConfig, BadLabelMapsAreRefusedNamingTheKey) {
  const std::pair<std::string, std::string> cases[] = {
      {R"(,"num_labels":3,"id2label":{"0":"a","1":"b"})", "key 'num_labels' = 3 disagrees"},
      {R"(,"id2label":{"0":"a","7":"b"})", "key 'id2label'"},
      {R"(,"id2label":{"0":"a","x":"b"})", "has key 'x'"},
      {R"(,"id2label":{"0":"a","1":5})", "is not a string"},
      {R"(,"id2label":[1,2])", "key 'id2label'"},
      {R"(,"num_labels":0)", "key 'num_labels' = 0"},
      {R"(,"num_labels":100000)", "key 'num_labels' = 100000"},
      {R"(,"num_labels":3,"problem_type":"regression")", "key 'problem_type'"},
  };
  for (const auto& [extra, want] : cases) {
    auto c = ParseModelConfig(Bert("BertForSequenceClassification", extra));
    ASSERT_FALSE(c.ok()) << extra;
    EXPECT_NE(c.status().message().find(want), std::string::npos)
        << extra << ": " << c.status().message();
  }
}

class ClassifyFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (fs::temp_directory_path() / ("petal_classify_cfg_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("config.json", Bert("BertForSequenceClassification", R"(,"num_labels":3)"));
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
};

TEST_F(ClassifyFolder, TaskMustAgreeWithTheHead) {
  auto c = LoadModelConfig(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->pooling, PoolingMode::kCls);
  EXPECT_FALSE(c->normalize);
  Write("petal_config.json", R"({"task":"classify"})");
  ASSERT_TRUE(LoadModelConfig(dir_).ok());
  for (const char* task : {"score", "embed"}) {
    Write("petal_config.json", std::string(R"({"task":")") + task + "\"}");
    auto bad = LoadModelConfig(dir_);
    ASSERT_FALSE(bad.ok()) << task;
    EXPECT_NE(bad.status().message().find("is a sequence classifier (3 labels), task \"classify\""),
              std::string::npos)
        << bad.status().message();
  }
  Write("config.json", Bert("BertModel", ""));
  Write("petal_config.json", R"({"task":"classify"})");
  auto none = LoadModelConfig(dir_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("has no classification head"), std::string::npos)
      << none.status().message();
}

// SPLADE folders: BertForMaskedLM + a SpladePooling module is a sparse model; another class or a
// pooling the engine does not compute is refused naming the file.
TEST_F(ClassifyFolder, SpladePoolingMakesASparseModel) {
  Write("config.json", Bert("BertForMaskedLM", ""));
  Write("modules.json",
        R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.sparse_encoder.models.)"
        R"(MLMTransformer"},{"idx":1,"name":"1","path":"1_SpladePooling","type":)"
        R"("sentence_transformers.sparse_encoder.models.SpladePooling"}])");
  fs::create_directories(dir_ + "/1_SpladePooling");
  Write("1_SpladePooling/config.json",
        R"({"pooling_strategy":"max","activation_function":"relu"})");
  auto c = LoadModelConfig(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kSparse);
  EXPECT_EQ(c->score_head, ScoreHead::kBertMlmSplade);
  EXPECT_EQ(c->OutputDim(), 10);
  EXPECT_STREQ(ModelTaskName(c->task), "sparse");
  Write("1_SpladePooling/config.json", R"({"pooling_strategy":"sum"})");
  auto sum = LoadModelConfig(dir_);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("key 'pooling_strategy' = 'sum'"), std::string::npos)
      << sum.status().message();
  Write("1_SpladePooling/config.json", R"({"activation_function":"softplus"})");
  ASSERT_FALSE(LoadModelConfig(dir_).ok());
  Write("1_SpladePooling/config.json", "{}");
  Write("config.json", Bert("BertModel", ""));
  auto plain = LoadModelConfig(dir_);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(
      plain.status().message().find("needs a BertForMaskedLM or XLMRobertaForMaskedLM checkpoint"),
      std::string::npos)
      << plain.status().message();
}

}  // namespace
// An inference-free SPLADE model (a sentence-transformers Router): the document route's
// transformer folder holds config.json (TransformerDir finds it), its SpladePooling makes the model
// sparse, the query route's SparseStaticEmbedding folder is reported; a Router without a
// SpladePooling document route, or with a module folder leaving the model folder, is refused.
TEST_F(ClassifyFolder, RouterWithAStaticQueryRouteIsASparseModel) {
  fs::remove(dir_ + "/config.json");
  fs::create_directories(dir_ + "/document_0_MLMTransformer");
  fs::create_directories(dir_ + "/document_1_SpladePooling");
  Write("document_0_MLMTransformer/config.json", Bert("BertForMaskedLM", ""));
  Write("document_1_SpladePooling/config.json", R"({"pooling_strategy":"max"})");
  Write("modules.json", R"([{"idx":0,"name":"0","path":"","type":)"
                        R"("sentence_transformers.base.modules.router.Router"}])");
  const std::string types =
      R"("types":{"query_0_SparseStaticEmbedding":"x.SparseStaticEmbedding",)"
      R"("document_0_MLMTransformer":"x.MLMTransformer","document_1_SpladePooling":)"
      R"("x.SpladePooling"})";
  Write("router_config.json",
        "{" + types +
            R"(,"structure":{"query":["query_0_SparseStaticEmbedding"],"document":)"
            R"(["document_0_MLMTransformer","document_1_SpladePooling"]}})");
  EXPECT_EQ(TransformerDir(dir_), dir_ + "/document_0_MLMTransformer");
  auto r = ReadRouterFolder(dir_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->present);
  EXPECT_EQ(r->query_static, "query_0_SparseStaticEmbedding");
  EXPECT_EQ(r->doc_splade, "document_1_SpladePooling");
  auto c = LoadModelConfig(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, ModelTask::kSparse);
  EXPECT_EQ(c->score_head, ScoreHead::kBertMlmSplade);
  Write("router_config.json", "{" + types +
                                  R"(,"structure":{"query":["query_0_SparseStaticEmbedding"],)"
                                  R"("document":["document_0_MLMTransformer"]}})");
  auto no_splade = LoadModelConfig(dir_);
  ASSERT_FALSE(no_splade.ok());
  EXPECT_NE(no_splade.status().message().find("only as a SPLADE model"), std::string::npos)
      << no_splade.status().message();
  Write("router_config.json", "{" + types + R"(,"structure":{"query":["../x"]}})");
  auto escape = ReadRouterFolder(dir_);
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("leaves the model folder"), std::string::npos);
}

}  // namespace petal
