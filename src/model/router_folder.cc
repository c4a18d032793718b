// Reading sentence-transformers Router folders (see router_folder.h).
#include "model/router_folder.h"

#include <simdjson.h>

#include <string_view>

#include "common/file_util.h"

namespace petal {

StatusOr<RouterFolder> ReadRouterFolder(const std::string& dir) {
  RouterFolder r;
  const std::string modules = JoinPath(dir, "modules.json");
  if (!FileExists(modules)) return r;
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(modules));
  simdjson::dom::parser parser;
  simdjson::dom::array mods;
  if (parser.parse(text).get_array().get(mods) != simdjson::SUCCESS) {
    return InvalidArgument(modules + " is not a JSON array");
  }
  std::string router_path;
  for (auto m : mods) {
    std::string_view type, path;
    if (m["type"].get_string().get(type) != simdjson::SUCCESS) continue;
    if (type.find("Router") == std::string_view::npos) continue;
    if (m["path"].get_string().get(path) != simdjson::SUCCESS) path = "";
    r.present = true;
    router_path = std::string(path);
  }
  if (!r.present) return r;
  if (router_path.find("..") != std::string::npos) {
    return InvalidArgument(modules + ": Router path '" + router_path + "' leaves the model folder");
  }
  const std::string rdir = router_path.empty() ? dir : JoinPath(dir, router_path);
  const std::string cfg = JoinPath(rdir, "router_config.json");
  PETAL_ASSIGN_OR_RETURN(std::string ctext, ReadFile(cfg));
  simdjson::dom::parser p2;
  simdjson::dom::element doc;
  if (p2.parse(ctext).get(doc) != simdjson::SUCCESS) return InvalidArgument(cfg + " is not JSON");
  simdjson::dom::object types, structure;
  if (doc["types"].get_object().get(types) != simdjson::SUCCESS ||
      doc["structure"].get_object().get(structure) != simdjson::SUCCESS) {
    return InvalidArgument(cfg + ": needs the objects 'types' and 'structure'");
  }
  auto sub = [&](std::string_view name) -> StatusOr<std::string> {
    if (name.find("..") != std::string_view::npos) {
      return InvalidArgument(cfg + ": module folder '" + std::string(name) +
                             "' leaves the model folder");
    }
    return router_path.empty() ? std::string(name) : JoinPath(router_path, std::string(name));
  };
  for (auto [route, list] : structure) {
    simdjson::dom::array names;
    if (list.get_array().get(names) != simdjson::SUCCESS) {
      return InvalidArgument(cfg + ": structure." + std::string(route) + " is not a list");
    }
    for (auto n : names) {
      std::string_view name, type;
      if (n.get_string().get(name) != simdjson::SUCCESS) continue;
      if (types[name].get_string().get(type) != simdjson::SUCCESS) type = "";
      PETAL_ASSIGN_OR_RETURN(std::string path, sub(name));
      if (route == "query" && type.find("SparseStaticEmbedding") != std::string_view::npos) {
        r.query_static = path;
      } else if (route == "document" && type.find("SpladePooling") != std::string_view::npos) {
        r.doc_splade = path;
      } else if (route == "document" && type.find("Transformer") != std::string_view::npos) {
        r.doc_transformer = path;
      }
    }
  }
  return r;
}

std::string TransformerDir(const std::string& dir) {
  if (FileExists(JoinPath(dir, "config.json"))) return dir;
  auto r = ReadRouterFolder(dir);
  if (!r.ok() || !r->present || r->doc_transformer.empty()) return dir;
  return JoinPath(dir, r->doc_transformer);
}

}  // namespace petal
