// sentence-transformers prompts: the texts a model asks to be prepended to its inputs
// (config_sentence_transformers.json: {"prompts": {name: text}, "default_prompt_name": name}),
// and the one rule that picks the prompt for an input, shared by the gateway and `petal embed`
// so that both embed the same text the same way. Thread-safety: immutable after Load.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace petal {

struct Prompts {
  std::map<std::string, std::string> by_name;
  std::string default_name;  // "" when the model names none

  // Reads `model_dir`/config_sentence_transformers.json; an absent file means no prompts.
  static StatusOr<Prompts> Load(const std::string& model_dir);

  // The text to prepend: the prompt named `prompt_name` if given (InvalidArgument if the model
  // has none of that name); else the prompt named `input_type` (e.g. "query", "document") when
  // the model defines one; else the default prompt; else "".
  StatusOr<std::string> Prefix(std::string_view prompt_name,
                               std::string_view input_type = "") const;
};

}  // namespace petal
