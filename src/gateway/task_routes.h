// What each kind of model serves, from the gateway's route table (Gateway::kRouteTable's tasks
// column): the 400 a route gets when the model cannot serve it, naming the routes that would, and
// the start-up hint's example request for a model of each task (`petal serve`, `petal gateway`).
// One table per concern: kTaskTable in task_routes.cc (the task's noun and example), the route
// table for which routes serve it; no route handler checks the task itself.
// Thread-safety: pure functions over constant tables.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gateway/gateway.h"
#include "model/config.h"

namespace petal::gateway {

// How a model of `task` is named in messages: "an embedding model", "a ranking model (...)",
// "a sequence classifier (...)".
std::string_view TaskNoun(ModelTask task);

// The task-specific routes (tasks != kAnyTask) that serve `task`, in table order, as
// "/a, /b and /c".
std::string ServedRoutes(std::span<const Route> routes, ModelTask task);

// nullopt when `route` serves models of `task`; else a 400 (param "model"):
// "model 'NAME' is a sequence classifier (...): it serves /predict and /classify; /v1/embeddings
// needs an embedding model".
std::optional<RequestError> TaskRefusal(std::span<const Route> routes, const Route& route,
                                        ModelTask task, const std::string& model_name);

// The start-up hint's request for a model of `task`: its main route and a small JSON body.
struct ExampleRequest {
  std::string_view path;
  std::string_view body;
};
ExampleRequest ExampleFor(ModelTask task);
// ExampleFor(task)'s body, naming `model` first when it is not empty (a gateway serving several
// models: each model's hint names it).
std::string ExampleBody(ModelTask task, std::string_view model);

}  // namespace petal::gateway
