// The task -> routes table (task_routes.h) against the route table, and the classification body
// parsers (request_parse.h: ParsePredict, ParseClassify) on their shapes. Thread-safety:
// single-threaded tests.
#include "gateway/task_routes.h"

#include <gtest/gtest.h>

namespace petal::gateway {
namespace {

constexpr ModelTask kTasks[] = {ModelTask::kEmbed, ModelTask::kScore, ModelTask::kClassify,
                                ModelTask::kSparse};

TEST(TaskRoutes, EveryTaskHasRoutesAndItsExampleRouteServesIt) {
  for (ModelTask t : kTasks) {
    EXPECT_FALSE(ServedRoutes(Gateway::Routes(), t).empty()) << ModelTaskName(t);
    const ExampleRequest ex = ExampleFor(t);
    const Route* r = Gateway::FindRoute(ex.path);
    ASSERT_NE(r, nullptr) << ex.path;
    EXPECT_NE(r->tasks & TaskBit(t), 0u) << ex.path;
    EXPECT_FALSE(TaskRefusal(Gateway::Routes(), *r, t, "m").has_value()) << ex.path;
    EXPECT_EQ(ex.body.front(), '{');
  }
  EXPECT_EQ(ServedRoutes(Gateway::Routes(), ModelTask::kClassify), "/predict and /classify");
  EXPECT_EQ(ServedRoutes(Gateway::Routes(), ModelTask::kScore),
            "/v1/score, /rerank and /v1/rerank");
  EXPECT_EQ(ServedRoutes(Gateway::Routes(), ModelTask::kSparse),
            "/v1/embeddings and /embed_sparse");
}

TEST(TaskRoutes, ExampleBodiesNameTheModelWhenAsked) {
  EXPECT_EQ(ExampleBody(ModelTask::kEmbed, ""), R"({"input": "Hello, world"})");
  EXPECT_EQ(ExampleBody(ModelTask::kEmbed, "minilm"),
            R"({"model": "minilm", "input": "Hello, world"})");
  EXPECT_EQ(ExampleBody(ModelTask::kClassify, "org/a\"b"),
            R"({"model": "org/a\"b", "inputs": "I loved this film!"})");
}

TEST(TaskRoutes, RefusalsNameWhatTheModelServesAndWhatTheRouteNeeds) {
  auto e = TaskRefusal(Gateway::Routes(), *Gateway::FindRoute("/v1/embeddings"),
                       ModelTask::kClassify, "sst2");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400u);
  EXPECT_EQ(e->param, "model");
  EXPECT_EQ(e->message,
            "model 'sst2' is a sequence classifier (it labels texts and text pairs): it serves "
            "/predict and /classify; /v1/embeddings needs an embedding model or a sparse embedding "
            "model");
  auto p = TaskRefusal(Gateway::Routes(), *Gateway::FindRoute("/predict"), ModelTask::kScore, "ce");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->message,
            "model 'ce' is a ranking model (it scores query/document pairs): it serves /v1/score, "
            "/rerank and /v1/rerank; /predict needs a sequence classifier");
  // Routes for every model never refuse.
  for (const char* path : {"/tokenize", "/info", "/health", "/v1/models"}) {
    for (ModelTask t : kTasks) {
      EXPECT_FALSE(TaskRefusal(Gateway::Routes(), *Gateway::FindRoute(path), t, "m")) << path;
    }
  }
}

TEST(ClassifyParse, PredictShapes) {
  ClassifyParams one;
  ASSERT_FALSE(ParsePredict(R"({"inputs":"great"})", 8, &one));
  EXPECT_TRUE(one.single);
  EXPECT_FALSE(one.has_pairs);
  ClassifyParams pair;
  ASSERT_FALSE(ParsePredict(R"({"inputs":["a","b"],"raw_scores":true})", 8, &pair));
  EXPECT_TRUE(pair.single && pair.has_pairs && pair.raw_scores);
  EXPECT_EQ(pair.second, std::vector<std::string>{"b"});
  ClassifyParams batch;
  ASSERT_FALSE(ParsePredict(R"({"inputs":["x",["y"],["z","w"]],"truncate":true})", 8, &batch));
  EXPECT_FALSE(batch.single);
  EXPECT_TRUE(batch.truncate);
  EXPECT_EQ(batch.texts, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(batch.is_pair, (std::vector<uint8_t>{0, 0, 1}));
  ClassifyParams many;
  auto too_many = ParsePredict(R"({"inputs":[["a"],["b"],["c"]]})", 2, &many);
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->http_status, 413u);
  ClassifyParams two;  // one pair counts as one input
  EXPECT_FALSE(ParsePredict(R"({"inputs":["a","b"]})", 1, &two));
}

TEST(ClassifyParse, ClassifyShapes) {
  ClassifyParams p;
  ASSERT_FALSE(ParseClassify(R"({"model":"m","input":["a","b"],"activation":false})", 8, &p));
  EXPECT_EQ(p.model, "m");
  EXPECT_TRUE(p.raw_scores);
  EXPECT_EQ(p.texts.size(), 2u);
  ClassifyParams ids;
  auto err = ParseClassify(R"({"input":[[1,2,3]]})", 8, &ids);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->param, "input");
  EXPECT_NE(err->message.find("'input[0]' must be a string"), std::string::npos) << err->message;
}

}  // namespace
}  // namespace petal::gateway
