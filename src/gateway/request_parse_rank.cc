// The ranking request bodies: /score (ours), TEI's /rerank and Cohere/Jina's /v1/rerank
// (declared in request_parse.h).
#include <simdjson.h>

#include "gateway/request_json.h"
#include "gateway/request_parse.h"

namespace petal::gateway {

using namespace request_json;
using simdjson::dom::element;
using simdjson::dom::object;

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
  out->documents.assign(in.texts.begin(), in.texts.end());  // copies: the parser is this thread's
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
  if (auto err = CheckCount(arr.size(), f, max_inputs)) return err;
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
