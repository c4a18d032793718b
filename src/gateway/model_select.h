// Several models behind one gateway: which served model a request goes to, from its `model`
// field and its route, and which servers `petal gateway --server [MODEL=]ADDRESS` gives each
// model (the body's `model` is read by request_parse.h's PeekModelField). The rules (docs/api.md,
// "Several models"):
//   - one model: every request goes to it, whatever `model` it names or none (as a single-model
//     gateway always answered; the name is echoed back);
//   - several: `model` picks the model whose name or alias (its folder's name, its hub id,
//     --model-name) it equals, names first; an unknown name is a 404 naming the served models;
//     a request naming none goes to the first model, in the order given, that serves its route
//     (TEI/Infinity-like: the first embedder answers /v1/embeddings, the first reranker /rerank);
//     if no model serves the route, a 400 naming the served models.
// A named model that cannot serve the route is refused by the caller (task_routes.h).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "gateway/request_parse.h"
#include "model/config.h"

namespace petal::gateway {

// What selection needs to know of a served model.
struct ModelNames {
  std::string name;                  // reported as `model`
  std::vector<std::string> aliases;  // other names that pick it (folder name, hub id)
  ModelTask task = ModelTask::kEmbed;
};

struct ModelChoice {
  size_t index = 0;                   // into the served models (valid when !error)
  std::optional<RequestError> error;  // 404 unknown name, or 400 no model serves the route
};

// The model for a request naming `requested` (empty: none) on `path`, a route serving the tasks
// `route_tasks` (TaskBit set; 0 = any model). Naming none: the first model serving the route,
// except that a sparse model comes after the others on a route that also serves embedders.
ModelChoice SelectModel(std::span<const ModelNames> models, std::string_view requested,
                        std::string_view path, unsigned route_tasks);

// "a (embed), b (score)": the served models with their tasks, for messages.
std::string ServedModelList(std::span<const ModelNames> models);

// Servers per model from `--server` values: "MODEL=ADDRESS" (MODEL a name or alias, as in
// requests) or a bare "ADDRESS", which is allowed only with one model. Every model needs at least
// one server; an error names what is wrong.
StatusOr<std::vector<std::vector<std::string>>> AssignServers(
    std::span<const ModelNames> models, const std::vector<std::string>& server_flags);

}  // namespace petal::gateway
