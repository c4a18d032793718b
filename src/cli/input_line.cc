#include "cli/input_line.h"

namespace petal::cli {

StatusOr<InputLine> ParseInputLine(simdjson::dom::parser* parser, std::string_view line,
                                   InputFormat format, int64_t vocab_size) {
  InputLine out;
  if (format == InputFormat::kText) {
    out.text.assign(line);
    return out;
  }
  simdjson::dom::element doc;
  if (parser->parse(line.data(), line.size()).get(doc) != simdjson::SUCCESS) {
    return InvalidArgument("not valid JSON");
  }
  if (format == InputFormat::kJsonString) {
    std::string_view s;
    if (doc.get_string().get(s) != simdjson::SUCCESS) {
      return InvalidArgument("expected a JSON string");
    }
    out.text.assign(s);
    return out;
  }
  simdjson::dom::array arr;
  if (doc.get_array().get(arr) != simdjson::SUCCESS) {
    return InvalidArgument("expected a JSON array of token ids");
  }
  for (auto v : arr) {
    const std::string range = "the vocabulary [0, " + std::to_string(vocab_size) + ")";
    int64_t id;
    if (v.get_int64().get(id) != simdjson::SUCCESS) {
      return InvalidArgument("token ids must be integers in " + range);
    }
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside " + range);
    }
    out.ids.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace petal::cli
