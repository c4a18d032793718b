#include "gateway/request_parse.h"

#include <simdjson.h>

#include "gateway/request_json.h"

namespace petal::gateway {
namespace {

using namespace request_json;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// An optional positive integer field (at most 2^20): "dimensions", "max_active_dims".
std::optional<RequestError> OptPositive(const object& o, const char* key, uint32_t* out) {
  element e;
  if (o.at_key(key).get(e) || e.is_null()) return std::nullopt;
  int64_t v;
  if (e.get_int64().get(v) || v < 1 || v > 1 << 20) {
    return Bad(std::string("'") + key + "' must be a positive integer", key);
  }
  *out = static_cast<uint32_t>(v);
  return std::nullopt;
}

std::optional<RequestError> OptDimensions(const object& o, uint32_t* out) {
  return OptPositive(o, "dimensions", out);
}

std::optional<RequestError> OptOutput(const object& o, OutputType* out) {
  std::string s;
  if (auto err = OptString(o, "output_dtype", &s)) return err;
  if (s.empty() || s == "float32" || s == "float") {
    *out = OutputType::kFloat32;
  } else if (s == "float16") {
    *out = OutputType::kFloat16;
  } else if (s == "int8") {
    *out = OutputType::kInt8;
  } else if (s == "uint8") {
    *out = OutputType::kUint8;
  } else if (s == "binary") {
    *out = OutputType::kBinary;
  } else if (s == "ubinary") {
    *out = OutputType::kUbinary;
  } else {
    return Bad("'output_dtype' must be one of float32, float16, int8, uint8, binary, ubinary",
               "output_dtype");
  }
  return std::nullopt;
}

std::optional<RequestError> InputType(const object& o, std::string* out) {
  if (auto err = OptString(o, "input_type", out)) return err;
  if (!out->empty() && *out != "query" && *out != "document") {
    return Bad("'input_type' must be \"query\" or \"document\"", "input_type");
  }
  return std::nullopt;
}

std::optional<RequestError> TruncationDirection(const object& o, bool* left) {
  std::string dir;
  if (auto err = OptString(o, "truncation_direction", &dir)) return err;
  if (dir.empty() || dir == "right" || dir == "Right") {
    *left = false;
  } else if (dir == "left" || dir == "Left") {
    *left = true;
  } else {
    return Bad("'truncation_direction' must be \"left\" or \"right\"", "truncation_direction");
  }
  return std::nullopt;
}

}  // namespace

const char* OutputTypeName(OutputType t) {
  switch (t) {
    case OutputType::kFloat32:
      return "float32";
    case OutputType::kFloat16:
      return "float16";
    case OutputType::kInt8:
      return "int8";
    case OutputType::kUint8:
      return "uint8";
    case OutputType::kBinary:
      return "binary";
    case OutputType::kUbinary:
      return "ubinary";
  }
  return "?";
}

namespace {

// The fields both OpenAI-shaped embedding routes share: model, dimensions, encoding_format
// ("float" or "base64") and output_dtype, into `out`'s fields of the same names.
template <typename Params>
std::optional<RequestError> OpenAiOutputFields(const object& doc, Params* out) {
  if (auto err = OptString(doc, "model", &out->model)) return err;
  if (auto err = OptDimensions(doc, &out->dimensions)) return err;
  std::string format;
  if (auto err = OptString(doc, "encoding_format", &format)) return err;
  if (format == "base64") {
    out->base64 = true;
  } else if (!format.empty() && format != "float") {
    return Bad("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
  }
  if (auto err = OptOutput(doc, &out->output)) return err;
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> ParseOpenAiEmbed(std::string_view body, size_t max_inputs,
                                             EmbedParams* out) {
  object doc;
  // The texts view the parsed body: the request's own parser, held with them.
  if (auto err = ParseBody(body, &doc, &out->inputs.body)) return err;
  element input;
  if (doc.at_key("input").get(input) || input.is_null()) {
    return Bad("'input' is required", "input");
  }
  if (auto err = ParseInputs(input, "input", max_inputs, true, &out->inputs)) return err;
  if (auto err = OpenAiOutputFields(doc, out)) return err;
  // Extensions beyond OpenAI's fields (documented in docs/api.md).
  if (auto err = OptBool(doc, "truncate", &out->truncate)) return err;
  if (auto err = TruncationDirection(doc, &out->truncate_left)) return err;
  if (auto err = OptString(doc, "prompt_name", &out->prompt_name)) return err;
  if (auto err = InputType(doc, &out->input_type)) return err;
  std::string long_input;
  if (auto err = OptString(doc, "long_input", &long_input)) return err;
  if (long_input == "mean") {
    out->long_input_mean = true;
  } else if (!long_input.empty() && long_input != "error") {
    return Bad("'long_input' must be \"error\" or \"mean\"", "long_input");
  }
  if (out->long_input_mean && out->truncate) {
    return Bad("'long_input': \"mean\" and 'truncate': true exclude each other", "long_input");
  }
  if (auto err = OptBool(doc, "sparse", &out->sparse)) return err;
  if (auto err = OptPositive(doc, "max_active_dims", &out->max_active_dims)) return err;
  return std::nullopt;
}

std::optional<RequestError> ParseContextualEmbed(std::string_view body, ContextualParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  element input;
  simdjson::dom::array docs;
  if (doc.at_key("input").get(input) || input.get_array().get(docs)) {
    return Bad("'input' is required: an array of documents, each an array of chunk strings",
               "input");
  }
  if (docs.size() == 0) return Bad("'input' must not be empty", "input");
  if (docs.size() > kMaxContextDocuments) {
    return RequestError{413,
                        "'input' has " + std::to_string(docs.size()) + " documents; at most " +
                            std::to_string(kMaxContextDocuments) + " are allowed",
                        "input"};
  }
  size_t i = 0, total = 0;
  out->documents.reserve(docs.size());
  for (element d : docs) {
    const std::string where = "input[" + std::to_string(i) + "]";
    simdjson::dom::array chunks;
    if (d.get_array().get(chunks)) {
      return Bad("'" + where + "' must be an array of chunk strings", "input");
    }
    if (chunks.size() == 0) return Bad("'" + where + "' is an empty document", "input");
    if (chunks.size() > kMaxChunksPerDocument) {
      return RequestError{413,
                          "'" + where + "' has " + std::to_string(chunks.size()) +
                              " chunks; at most " + std::to_string(kMaxChunksPerDocument) +
                              " per document",
                          "input"};
    }
    total += chunks.size();
    if (total > kMaxContextChunks) {
      return RequestError{
          413, "'input' has more than " + std::to_string(kMaxContextChunks) + " chunks in all",
          "input"};
    }
    auto& out_doc = out->documents.emplace_back();
    out_doc.reserve(chunks.size());
    size_t j = 0;
    for (element c : chunks) {
      std::string_view sv;
      const std::string cw = where + "[" + std::to_string(j) + "]";
      if (c.get_string().get(sv)) return Bad("'" + cw + "' must be a string", "input");
      if (sv.empty()) return Bad("'" + cw + "' is an empty chunk", "input");
      out_doc.emplace_back(sv);
      ++j;
    }
    ++i;
  }
  if (auto err = OpenAiOutputFields(doc, out)) return err;
  element ov;
  if (!doc.at_key("window_overlap").get(ov) && !ov.is_null()) {
    int64_t v;
    if (ov.get_int64().get(v) || v < 0 || v > INT32_MAX) {
      return Bad("'window_overlap' must be a non-negative integer (tokens)", "window_overlap");
    }
    out->overlap = static_cast<int>(v);
  }
  if (auto err = OptString(doc, "prompt_name", &out->prompt_name)) return err;
  if (auto err = InputType(doc, &out->input_type)) return err;
  return std::nullopt;
}

std::optional<RequestError> ParseTeiEmbed(std::string_view body, size_t max_inputs,
                                          EmbedParams* out) {
  object doc;
  // The texts view the parsed body: the request's own parser, held with them.
  if (auto err = ParseBody(body, &doc, &out->inputs.body)) return err;
  element input;
  if (doc.at_key("inputs").get(input) || input.is_null()) {
    return Bad("'inputs' is required", "inputs");
  }
  if (auto err = ParseInputs(input, "inputs", max_inputs, true, &out->inputs)) return err;
  bool normalize = true;  // TEI's default
  if (auto err = OptBool(doc, "normalize", &normalize)) return err;
  out->normalize = normalize;
  if (auto err = OptBool(doc, "truncate", &out->truncate)) return err;
  if (auto err = TruncationDirection(doc, &out->truncate_left)) return err;
  if (auto err = OptDimensions(doc, &out->dimensions)) return err;
  if (auto err = OptString(doc, "prompt_name", &out->prompt_name)) return err;
  if (auto err = InputType(doc, &out->input_type)) return err;
  if (auto err = OptOutput(doc, &out->output)) return err;
  if (auto err = OptPositive(doc, "max_active_dims", &out->max_active_dims)) return err;
  return std::nullopt;
}

std::optional<RequestError> ParseTokenize(std::string_view body, size_t max_inputs,
                                          TokenizeParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  element input;
  if (doc.at_key("inputs").get(input) || input.is_null()) {
    return Bad("'inputs' is required", "inputs");
  }
  Inputs in;
  if (auto err = ParseInputs(input, "inputs", max_inputs, false, &in)) return err;
  out->batch = input.is_array();
  out->texts.assign(in.texts.begin(), in.texts.end());  // copies: the parser is this thread's
  if (auto err = OptBool(doc, "add_special_tokens", &out->add_special_tokens)) return err;
  return std::nullopt;
}

std::string PeekModelField(std::string_view body) {
  thread_local simdjson::ondemand::parser parser;
  const simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(obj)) return "";
  // Field by field with unescaped keys: what the DOM's at_key matches (the first such key).
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return "";
    if (key != "model") continue;
    std::string_view model;
    if (field.value().get_string().get(model)) return "";
    return std::string(model);
  }
  return "";
}

std::optional<RequestError> CheckVocabulary(const std::vector<std::vector<int32_t>>& ids,
                                            int64_t vocab, const std::string& field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int32_t id : ids[i]) {
      if (id >= vocab) {
        return RequestError{400,
                            "'" + field + "[" + std::to_string(i) + "]' holds token id " +
                                std::to_string(id) + " >= vocabulary size " + std::to_string(vocab),
                            field};
      }
    }
  }
  return std::nullopt;
}

}  // namespace petal::gateway
