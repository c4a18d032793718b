#include "gateway/request_parse.h"

#include <simdjson.h>

namespace petal::gateway {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

RequestError Bad(std::string message, std::string param) {
  return {400, std::move(message), std::move(param)};
}

// Parses `body` into `*doc` with this thread's parser (valid until the next parse on the thread).
std::optional<RequestError> ParseBody(std::string_view body, object* doc) {
  thread_local simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(body.data(), body.size(), true).get(root)) {
    return Bad(std::string("request body is not valid JSON: ") + simdjson::error_message(err), "");
  }
  if (root.get_object().get(*doc)) return Bad("request body must be a JSON object", "");
  return std::nullopt;
}

// A non-negative integer token id that fits int32.
bool TokenId(element e, int32_t* id) {
  int64_t v;
  if (e.get_int64().get(v) || v < 0 || v > INT32_MAX) return false;
  *id = static_cast<int32_t>(v);
  return true;
}

// `field`: a string, an array of strings, an array of token ids, or an array of such arrays.
std::optional<RequestError> ParseInputs(element e, const char* field, size_t max_inputs,
                                        bool allow_ids, Inputs* out) {
  const std::string f = field;
  std::string_view sv;
  if (!e.get_string().get(sv)) {
    out->texts.emplace_back(sv);
    return std::nullopt;
  }
  simdjson::dom::array arr;
  if (e.get_array().get(arr)) {
    return Bad(
        "'" + f + "' must be a string or an array of strings" + (allow_ids ? " or token ids" : ""),
        f);
  }
  if (arr.size() == 0) return Bad("'" + f + "' must not be empty", f);
  if (arr.size() > max_inputs) {
    return RequestError{413,
                        "'" + f + "' has " + std::to_string(arr.size()) + " items; at most " +
                            std::to_string(max_inputs) + " are allowed",
                        f};
  }
  element e0;
  if (arr.at(0).get(e0)) return Bad("'" + f + "' is malformed", f);
  const element_type first = e0.type();
  if (allow_ids && (first == element_type::INT64 || first == element_type::UINT64)) {
    // One pre-tokenized sequence.
    out->pretokenized = true;
    auto& seq = out->ids.emplace_back();
    size_t i = 0;
    for (element v : arr) {
      int32_t id;
      if (!TokenId(v, &id)) {
        return Bad("'" + f + "[" + std::to_string(i) + "]' must be a non-negative token id", f);
      }
      seq.push_back(id);
      ++i;
    }
    return std::nullopt;
  }
  if (allow_ids && first == element_type::ARRAY) {
    out->pretokenized = true;
    size_t i = 0;
    for (element s : arr) {
      simdjson::dom::array inner;
      const std::string where = f + "[" + std::to_string(i) + "]";
      if (s.get_array().get(inner)) return Bad("'" + where + "' must be an array of token ids", f);
      if (inner.size() == 0) return Bad("'" + where + "' must not be empty", f);
      auto& seq = out->ids.emplace_back();
      seq.reserve(inner.size());
      size_t j = 0;
      for (element v : inner) {
        int32_t id;
        if (!TokenId(v, &id)) {
          return Bad("'" + where + "[" + std::to_string(j) + "]' must be a non-negative token id",
                     f);
        }
        seq.push_back(id);
        ++j;
      }
      ++i;
    }
    return std::nullopt;
  }
  size_t i = 0;
  out->texts.reserve(arr.size());
  for (element s : arr) {
    if (s.get_string().get(sv)) {
      return Bad("'" + f + "[" + std::to_string(i) + "]' must be a string", f);
    }
    out->texts.emplace_back(sv);
    ++i;
  }
  return std::nullopt;
}

std::optional<RequestError> OptString(const object& o, const char* key, std::string* out) {
  element e;
  if (o.at_key(key).get(e) || e.is_null()) return std::nullopt;
  std::string_view sv;
  if (e.get_string().get(sv)) return Bad(std::string("'") + key + "' must be a string", key);
  *out = std::string(sv);
  return std::nullopt;
}

std::optional<RequestError> OptBool(const object& o, const char* key, bool* out) {
  element e;
  if (o.at_key(key).get(e) || e.is_null()) return std::nullopt;
  if (e.get_bool().get(*out)) return Bad(std::string("'") + key + "' must be a boolean", key);
  return std::nullopt;
}

std::optional<RequestError> OptDimensions(const object& o, uint32_t* out) {
  element e;
  if (o.at_key("dimensions").get(e) || e.is_null()) return std::nullopt;
  int64_t v;
  if (e.get_int64().get(v) || v < 1 || v > 1 << 20) {
    return Bad("'dimensions' must be a positive integer", "dimensions");
  }
  *out = static_cast<uint32_t>(v);
  return std::nullopt;
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

std::optional<RequestError> ParseOpenAiEmbed(std::string_view body, size_t max_inputs,
                                             EmbedParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  element input;
  if (doc.at_key("input").get(input) || input.is_null()) {
    return Bad("'input' is required", "input");
  }
  if (auto err = ParseInputs(input, "input", max_inputs, true, &out->inputs)) return err;
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
  if (auto err = ParseBody(body, &doc)) return err;
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
  out->texts = std::move(in.texts);
  if (auto err = OptBool(doc, "add_special_tokens", &out->add_special_tokens)) return err;
  return std::nullopt;
}

std::optional<RequestError> ParseScore(std::string_view body, size_t max_inputs, ScoreParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  element q;
  std::string_view sv;
  if (doc.at_key("query").get(q) || q.get_string().get(sv)) {
    return Bad("'query' is required and must be a string", "query");
  }
  out->query = std::string(sv);
  element docs;
  if (doc.at_key("documents").get(docs) || !docs.is_array()) {
    return Bad("'documents' is required and must be an array of strings", "documents");
  }
  Inputs in;
  if (auto err = ParseInputs(docs, "documents", max_inputs, false, &in)) return err;
  out->documents = std::move(in.texts);
  if (auto err = OptString(doc, "model", &out->model)) return err;
  element k;
  if (!doc.at_key("top_k").get(k) && !k.is_null()) {
    int64_t v;
    if (k.get_int64().get(v) || v < 0)
      return Bad("'top_k' must be a non-negative integer", "top_k");
    out->top_k = static_cast<size_t>(v);
  }
  if (auto err = OptBool(doc, "truncate", &out->truncate)) return err;
  return std::nullopt;
}

namespace {

std::optional<RequestError> RerankQuery(const object& doc, RerankParams* out) {
  element q;
  std::string_view sv;
  if (doc.at_key("query").get(q) || q.get_string().get(sv)) {
    return Bad("'query' is required and must be a string", "query");
  }
  if (sv.empty()) return Bad("'query' is an empty string", "query");
  out->query = std::string(sv);
  if (auto err = OptString(doc, "instruction", &out->instruction)) return err;
  return OptBool(doc, "truncate", &out->truncate);
}

// `field`: an array of strings, each non-empty.
std::optional<RequestError> RerankTexts(const object& doc, const char* field, size_t max_inputs,
                                        bool allow_objects, RerankParams* out) {
  const std::string f = field;
  element docs;
  simdjson::dom::array arr;
  if (doc.at_key(field).get(docs) || docs.get_array().get(arr)) {
    return Bad("'" + f + "' is required and must be an array of strings", f);
  }
  if (arr.size() == 0) return Bad("'" + f + "' must not be empty", f);
  if (arr.size() > max_inputs) {
    return RequestError{413,
                        "'" + f + "' has " + std::to_string(arr.size()) + " items; at most " +
                            std::to_string(max_inputs) + " are allowed",
                        f};
  }
  size_t i = 0;
  for (element e : arr) {
    const std::string at = "'" + f + "[" + std::to_string(i) + "]'";
    std::string_view sv;
    if (e.get_string().get(sv)) {
      // Cohere's older shape: {"text": "..."}.
      if (!allow_objects || e.at_key("text").get_string().get(sv)) {
        return Bad(at + (allow_objects ? " must be a string or an object with a string 'text'"
                                       : " must be a string"),
                   f);
      }
    }
    if (sv.empty()) return Bad(at + " is an empty string", f);
    out->documents.emplace_back(sv);
    ++i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> ParseTeiRerank(std::string_view body, size_t max_inputs,
                                           RerankParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  if (auto err = RerankQuery(doc, out)) return err;
  if (auto err = RerankTexts(doc, "texts", max_inputs, false, out)) return err;
  if (auto err = OptBool(doc, "raw_scores", &out->raw_scores)) return err;
  if (auto err = OptBool(doc, "return_text", &out->return_text)) return err;
  return std::nullopt;
}

std::optional<RequestError> ParseCohereRerank(std::string_view body, size_t max_inputs,
                                              RerankParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  out->truncate = true;  // Cohere and Jina truncate long documents
  if (auto err = RerankQuery(doc, out)) return err;
  if (auto err = RerankTexts(doc, "documents", max_inputs, true, out)) return err;
  if (auto err = OptString(doc, "model", &out->model)) return err;
  if (auto err = OptBool(doc, "return_documents", &out->return_text)) return err;
  element k;
  if (!doc.at_key("top_n").get(k) && !k.is_null()) {
    int64_t v;
    if (k.get_int64().get(v) || v < 1) return Bad("'top_n' must be a positive integer", "top_n");
    out->top_n = static_cast<size_t>(v);
  }
  return std::nullopt;
}

}  // namespace petal::gateway
