// Model selection (model_select.h): which served model a request's `model` and route pick, the
// errors for unknown names and unserved routes, `--server MODEL=ADDRESS` assignment, and the body
// peek (request_parse.h's PeekModelField). Thread-safety: single-threaded tests.
#include "gateway/model_select.h"

#include <gtest/gtest.h>

#include "gateway/gateway.h"
#include "gateway/request_parse.h"

namespace petal::gateway {
namespace {

const unsigned kEmbedRoute = TaskBit(ModelTask::kEmbed);
const unsigned kScoreRoute = TaskBit(ModelTask::kScore);
const unsigned kScoreOrEmbed = kEmbedRoute | kScoreRoute;
const unsigned kClassifyRoute = TaskBit(ModelTask::kClassify);

std::vector<ModelNames> ThreeModels() {
  return {
      {"minilm", {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}, ModelTask::kEmbed},
      {"ce", {"bert-ce"}, ModelTask::kScore},
      {"splade", {}, ModelTask::kSparse}};
}

TEST(ModelSelect, OneModelTakesEveryRequestWhateverItNames) {
  const std::vector<ModelNames> one = {{"minilm", {}, ModelTask::kEmbed}};
  for (const char* name : {"", "minilm", "text-embedding-3-small"}) {
    const ModelChoice c = SelectModel(one, name, "/v1/embeddings", kEmbedRoute);
    EXPECT_FALSE(c.error.has_value()) << name;
    EXPECT_EQ(c.index, 0u);
  }
  // Even on a route it cannot serve: the task refusal (task_routes.h) answers that, as before.
  EXPECT_FALSE(SelectModel(one, "", "/rerank", kScoreRoute).error.has_value());
}

TEST(ModelSelect, NamesAndAliasesPickTheirModel) {
  const auto m = ThreeModels();
  EXPECT_EQ(SelectModel(m, "ce", "/rerank", kScoreRoute).index, 1u);
  EXPECT_EQ(SelectModel(m, "bert-ce", "/rerank", kScoreRoute).index, 1u);
  EXPECT_EQ(SelectModel(m, "sentence-transformers/all-MiniLM-L6-v2", "/embed", kEmbedRoute).index,
            0u);
  EXPECT_EQ(SelectModel(m, "splade", "/embed_sparse", TaskBit(ModelTask::kSparse)).index, 2u);
  // A named model is chosen even for a route it cannot serve: the caller refuses it with a 400.
  const ModelChoice wrong = SelectModel(m, "ce", "/v1/embeddings", kEmbedRoute);
  EXPECT_FALSE(wrong.error.has_value());
  EXPECT_EQ(wrong.index, 1u);
  // Names win over aliases.
  const std::vector<ModelNames> clash = {{"a", {"b"}, ModelTask::kEmbed},
                                         {"b", {}, ModelTask::kEmbed}};
  EXPECT_EQ(SelectModel(clash, "b", "/embed", kEmbedRoute).index, 1u);
}

TEST(ModelSelect, UnknownNameIsA404NamingTheServedModels) {
  const ModelChoice c = SelectModel(ThreeModels(), "gpt-4", "/v1/embeddings", kEmbedRoute);
  ASSERT_TRUE(c.error.has_value());
  EXPECT_EQ(c.error->http_status, 404u);
  EXPECT_EQ(c.error->param, "model");
  EXPECT_EQ(c.error->message,
            "model 'gpt-4' is not served here; served models: minilm (embed), ce (score), "
            "splade (sparse)");
}

TEST(ModelSelect, NoNameGoesToTheFirstModelServingTheRoute) {
  const auto m = ThreeModels();
  EXPECT_EQ(SelectModel(m, "", "/v1/embeddings", kEmbedRoute).index, 0u);
  EXPECT_EQ(SelectModel(m, "", "/rerank", kScoreRoute).index, 1u);
  EXPECT_EQ(SelectModel(m, "", "/embed_sparse", TaskBit(ModelTask::kSparse)).index, 2u);
  // /v1/score serves embedders and rankers: the first of either.
  EXPECT_EQ(SelectModel(m, "", "/v1/score", kScoreOrEmbed).index, 0u);
  // A sparse model listed first still leaves unnamed /v1/embeddings requests to the embedder
  // (it answers there only with "sparse": true); alone, it is chosen.
  const std::vector<ModelNames> sparse_first = {m[2], m[0]};
  const unsigned embeddings_route = kEmbedRoute | TaskBit(ModelTask::kSparse);
  EXPECT_EQ(SelectModel(sparse_first, "", "/v1/embeddings", embeddings_route).index, 1u);
  EXPECT_EQ(SelectModel(sparse_first, "", "/embed_sparse", TaskBit(ModelTask::kSparse)).index, 0u);
  const std::vector<ModelNames> sparse_and_ce = {m[2], m[1]};
  EXPECT_EQ(SelectModel(sparse_and_ce, "", "/v1/embeddings", embeddings_route).index, 0u);
  // Routes for any model (/tokenize, /info): the first model.
  EXPECT_EQ(SelectModel(m, "", "/tokenize", kAnyTask).index, 0u);
  const ModelChoice none = SelectModel(m, "", "/predict", kClassifyRoute);
  ASSERT_TRUE(none.error.has_value());
  EXPECT_EQ(none.error->http_status, 400u);
  EXPECT_EQ(none.error->message,
            "no model served here serves /predict; served models: minilm (embed), ce (score), "
            "splade (sparse)");
}

TEST(ModelSelect, ServersGoToTheModelTheyName) {
  const auto m = ThreeModels();
  auto s = AssignServers(m, {"minilm=h1:50051", "bert-ce=h2:50051", "splade=unix:/tmp/s.sock",
                             "all-MiniLM-L6-v2=h3:50051"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)[0], (std::vector<std::string>{"h1:50051", "h3:50051"}));
  EXPECT_EQ((*s)[1], (std::vector<std::string>{"h2:50051"}));
  EXPECT_EQ((*s)[2], (std::vector<std::string>{"unix:/tmp/s.sock"}));

  auto bare = AssignServers(m, {"h1:50051"});
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("MODEL=ADDRESS"), std::string::npos);
  auto unknown = AssignServers(m, {"minilm=h1:1", "ce=h2:1", "splade=h3:1", "nope=h4:1"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no model named 'nope'"), std::string::npos);
  auto missing = AssignServers(m, {"minilm=h1:1", "ce=h2:1"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "model 'splade' has no server (--server splade=HOST:PORT)");

  const std::vector<ModelNames> one = {{"minilm", {}, ModelTask::kEmbed}};
  auto single = AssignServers(one, {"h1:1", "minilm=h2:1"});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)[0], (std::vector<std::string>{"h1:1", "h2:1"}));
}

TEST(ModelSelect, PeekReadsTheTopLevelModelString) {
  EXPECT_EQ(PeekModelField(R"({"input": ["a", {"model": "x"}], "model": "ce"})"), "ce");
  EXPECT_EQ(PeekModelField(R"({"model": "minilm", "input": "a"})"), "minilm");
  EXPECT_EQ(PeekModelField(R"({"input": "a"})"), "");
  EXPECT_EQ(PeekModelField(R"({"model": 3})"), "");
  EXPECT_EQ(PeekModelField(R"(["model"])"), "");
  EXPECT_EQ(PeekModelField("not json"), "");
  EXPECT_EQ(PeekModelField(""), "");
  // As the route parsers read it: keys unescaped, the first "model" key.
  EXPECT_EQ(PeekModelField(R"({"mod\u0065l": "ce", "model": "x"})"), "ce");
  EXPECT_EQ(PeekModelField(R"({"model": "a\/b"})"), "a/b");
  EXPECT_EQ(PeekModelField(R"({"model": null})"), "");
}

}  // namespace
}  // namespace petal::gateway
