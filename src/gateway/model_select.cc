// Model selection for a gateway serving several models (see model_select.h).
#include "gateway/model_select.h"

#include "gateway/gateway.h"

namespace petal::gateway {
namespace {

// Index of the model `name` picks: names first, then aliases; nullopt if none.
std::optional<size_t> FindModel(std::span<const ModelNames> models, std::string_view name) {
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i].name == name) return i;
  }
  for (size_t i = 0; i < models.size(); ++i) {
    for (const auto& a : models[i].aliases) {
      if (a == name) return i;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string ServedModelList(std::span<const ModelNames> models) {
  std::string out;
  for (size_t i = 0; i < models.size(); ++i) {
    if (i > 0) out += ", ";
    out += models[i].name + " (" + ModelTaskName(models[i].task) + ")";
  }
  return out;
}

ModelChoice SelectModel(std::span<const ModelNames> models, std::string_view requested,
                        std::string_view path, unsigned route_tasks) {
  if (models.size() <= 1) return {};
  if (!requested.empty()) {
    if (auto i = FindModel(models, requested)) return {*i, std::nullopt};
    return {0, RequestError{404,
                            "model '" + std::string(requested) +
                                "' is not served here; served models: " + ServedModelList(models),
                            "model"}};
  }
  // A sparse model answers /v1/embeddings only when the request asks for "sparse": true, so a
  // request naming no model goes to a dense embedder there when one is served, whatever the order.
  const bool sparse_second =
      route_tasks != kAnyTask && (route_tasks & TaskBit(ModelTask::kEmbed)) != 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < models.size(); ++i) {
      if (pass == 0 && sparse_second && models[i].task == ModelTask::kSparse) continue;
      if (route_tasks == kAnyTask || (route_tasks & TaskBit(models[i].task)))
        return {i, std::nullopt};
    }
  }
  return {0, RequestError{400,
                          "no model served here serves " + std::string(path) +
                              "; served models: " + ServedModelList(models),
                          "model"}};
}

StatusOr<std::vector<std::vector<std::string>>> AssignServers(
    std::span<const ModelNames> models, const std::vector<std::string>& server_flags) {
  std::vector<std::vector<std::string>> out(models.size());
  for (const std::string& flag : server_flags) {
    const size_t eq = flag.find('=');
    if (eq == std::string::npos) {
      if (models.size() != 1) {
        return InvalidArgument("--server " + flag +
                               ": with several models, give each server as MODEL=ADDRESS (served "
                               "models: " +
                               ServedModelList(models) + ")");
      }
      out[0].push_back(flag);
      continue;
    }
    const std::string name = flag.substr(0, eq), address = flag.substr(eq + 1);
    auto i = FindModel(models, name);
    if (!i) {
      return InvalidArgument("--server " + flag + ": no model named '" + name +
                             "' (served models: " + ServedModelList(models) + ")");
    }
    if (address.empty()) return InvalidArgument("--server " + flag + ": no address");
    out[*i].push_back(address);
  }
  for (size_t i = 0; i < models.size(); ++i) {
    if (out[i].empty()) {
      return InvalidArgument("model '" + models[i].name + "' has no server (--server " +
                             models[i].name + "=HOST:PORT)");
    }
  }
  return out;
}

}  // namespace petal::gateway
