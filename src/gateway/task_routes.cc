// The task table and the refusals built from the route table (see task_routes.h).
#include "gateway/task_routes.h"

#include <vector>

namespace petal::gateway {
namespace {

struct TaskText {
  ModelTask task;
  std::string_view noun;
  ExampleRequest example;
};

// One row per ModelTask: how messages name it and the start-up hint's request.
constexpr TaskText kTaskTable[] = {
    {ModelTask::kEmbed, "an embedding model", {"/v1/embeddings", R"({"input": "Hello, world"})"}},
    {ModelTask::kScore,
     "a ranking model (it scores query/document pairs)",
     {"/rerank",
      R"({"query": "What is Petal?", "texts": ["Petal serves embedding models.", "A petal is part of a flower."]})"}},
    {ModelTask::kClassify,
     "a sequence classifier (it labels texts and text pairs)",
     {"/predict", R"({"inputs": "I loved this film!"})"}},
    {ModelTask::kSparse,
     "a sparse embedding model (SPLADE)",
     {"/embed_sparse", R"({"inputs": "What is Petal?"})"}},
    {ModelTask::kMultiVector,
     "a multi-vector model (ColBERT: one vector per token)",
     {"/embed_all", R"({"inputs": "What is Petal?", "input_type": "query"})"}},
};

const TaskText& Row(ModelTask task) {
  for (const TaskText& t : kTaskTable) {
    if (t.task == task) return t;
  }
  return kTaskTable[0];
}

std::string JoinAnd(const std::vector<std::string_view>& items, const char* last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? last : ", ";
    out += items[i];
  }
  return out;
}

}  // namespace

std::string_view TaskNoun(ModelTask task) { return Row(task).noun; }

ExampleRequest ExampleFor(ModelTask task) { return Row(task).example; }

std::string ExampleBody(ModelTask task, std::string_view model) {
  const std::string_view body = Row(task).example.body;
  if (model.empty()) return std::string(body);
  std::string quoted;  // a JSON string; names are paths or hub ids, so only \ and " matter
  for (char c : model) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return "{\"model\": \"" + quoted + "\", " + std::string(body.substr(1));
}

std::string ServedRoutes(std::span<const Route> routes, ModelTask task) {
  std::vector<std::string_view> paths;
  for (const Route& r : routes) {
    if (r.tasks != kAnyTask && (r.tasks & TaskBit(task))) paths.push_back(r.path);
  }
  return JoinAnd(paths, " and ");
}

std::optional<RequestError> TaskRefusal(std::span<const Route> routes, const Route& route,
                                        ModelTask task, const std::string& model_name) {
  if (route.tasks == kAnyTask || (route.tasks & TaskBit(task))) return std::nullopt;
  std::vector<std::string_view> needs;
  for (const TaskText& t : kTaskTable) {
    if (route.tasks & TaskBit(t.task)) {
      const std::string_view n = t.noun;
      needs.push_back(n.substr(0, n.find(" (")));  // the noun without its explanation
    }
  }
  return RequestError{400,
                      "model '" + model_name + "' is " + std::string(TaskNoun(task)) +
                          ": it serves " + ServedRoutes(routes, task) + "; " +
                          std::string(route.path) + " needs " + JoinAnd(needs, " or "),
                      "model"};
}

}  // namespace petal::gateway
