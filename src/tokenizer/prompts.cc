#include "tokenizer/prompts.h"

#include <simdjson.h>

#include "common/file_util.h"

namespace petal {

StatusOr<Prompts> Prompts::Load(const std::string& model_dir) {
  Prompts out;
  const std::string path = model_dir + "/config_sentence_transformers.json";
  if (!FileExists(path)) return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc)) return InvalidArgument(path + ": not valid JSON");
  simdjson::dom::object p;
  if (!doc["prompts"].get_object().get(p)) {
    for (auto [k, v] : p) {
      std::string_view text;
      if (!v.get_string().get(text)) out.by_name[std::string(k)] = std::string(text);
    }
  }
  std::string_view d;
  if (!doc["default_prompt_name"].get_string().get(d)) out.default_name = std::string(d);
  return out;
}

StatusOr<std::string> Prompts::Prefix(std::string_view prompt_name,
                                      std::string_view input_type) const {
  std::string name(prompt_name);
  // input_type picks the prompt of that name where the model defines one; models without
  // prompts embed queries and documents alike.
  if (name.empty() && by_name.count(std::string(input_type))) name = input_type;
  if (name.empty()) name = default_name;
  if (name.empty()) return std::string();
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    return InvalidArgument("'prompt_name' " + name + " is not one of the model's prompts");
  }
  return it->second;
}

}  // namespace petal
