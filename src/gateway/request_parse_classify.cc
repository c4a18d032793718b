// The classification request bodies: TEI's /predict and vLLM's /classify (declared in
// request_parse.h). Only shapes and types are checked here; lengths need the tokenizer
// (classify_routes.cc). Every error names the field (and the index inside it).
// Thread-safety: pure functions over this thread's parser.
#include <simdjson.h>

#include "gateway/request_json.h"
#include "gateway/request_parse.h"

namespace petal::gateway {

using namespace request_json;
using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

namespace {

constexpr const char* kPredictShape =
    "a string, a [text, text_pair] pair, or an array of inputs (each a string, [text] or "
    "[text, text_pair])";

void AddInput(ClassifyParams* out, std::string_view a, std::string_view b, bool pair) {
  out->texts.emplace_back(a);
  out->second.emplace_back(b);
  out->is_pair.push_back(pair ? 1 : 0);
  out->has_pairs = out->has_pairs || pair;
}

// `arr` as a single text ([text]) or a pair ([text, text_pair]) at `at` ("'inputs'" or
// "'inputs[3]'"); an empty string is named with its position in the pair.
std::optional<RequestError> ReadSequence(const array& arr, const std::string& at,
                                         ClassifyParams* out) {
  if (arr.size() != 1 && arr.size() != 2) {
    return Bad(at + " has " + std::to_string(arr.size()) +
                   " entries (a sequence is [text] or [text, text_pair])",
               "inputs");
  }
  std::string_view parts[2];
  size_t k = 0;
  for (element e : arr) {
    const std::string where = at.substr(0, at.size() - 1) + "[" + std::to_string(k) + "]'";
    if (e.get_string().get(parts[k])) return Bad(where + " must be a string", "inputs");
    if (parts[k].empty()) return Bad(where + " is an empty string", "inputs");
    ++k;
  }
  AddInput(out, parts[0], parts[1], arr.size() == 2);
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> ParsePredict(std::string_view body, size_t max_inputs,
                                         ClassifyParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  element in;
  if (doc.at_key("inputs").get(in) || in.is_null()) {
    return Bad(std::string("'inputs' is required: ") + kPredictShape, "inputs");
  }
  std::string_view sv;
  array arr;
  if (!in.get_string().get(sv)) {
    if (sv.empty()) return Bad("'inputs' is an empty string", "inputs");
    out->single = true;
    AddInput(out, sv, "", false);
  } else if (!in.get_array().get(arr)) {
    bool all_strings = arr.size() > 0;
    for (element e : arr) all_strings = all_strings && e.is_string();
    if (!all_strings) {  // a batch (one pair counts as one input)
      if (auto err = CheckCount(arr.size(), "inputs", max_inputs)) return err;
    }
    if (all_strings) {
      // TEI: an array of strings only is one (text, text_pair) sequence, not a batch.
      out->single = true;
      if (arr.size() != 2) {
        return Bad(
            "'inputs': an array of strings is one [text, text_pair] pair and must have 2 "
            "entries, not " +
                std::to_string(arr.size()) +
                " (in a batch, a text is \"a\" or [\"a\"]: [[\"a\"], [\"b\"], ...])",
            "inputs");
      }
      if (auto err = ReadSequence(arr, "'inputs'", out)) return err;
    }
    size_t i = 0;
    for (element e : arr) {
      if (out->single) break;  // the one pair above
      const std::string at = "'inputs[" + std::to_string(i) + "]'";
      array seq;
      if (!e.get_string().get(sv)) {
        if (sv.empty()) return Bad(at + " is an empty string", "inputs");
        AddInput(out, sv, "", false);
      } else if (!e.get_array().get(seq)) {
        if (auto err = ReadSequence(seq, at, out)) return err;
      } else {
        return Bad(at + " must be a string, [text] or [text, text_pair]", "inputs");
      }
      ++i;
    }
  } else {
    return Bad(std::string("'inputs' must be ") + kPredictShape, "inputs");
  }
  if (auto err = OptBool(doc, "raw_scores", &out->raw_scores)) return err;
  return OptBool(doc, "truncate", &out->truncate);
}

std::optional<RequestError> ParseClassify(std::string_view body, size_t max_inputs,
                                          ClassifyParams* out) {
  object doc;
  if (auto err = ParseBody(body, &doc)) return err;
  if (auto err = OptString(doc, "model", &out->model)) return err;
  element in;
  std::string_view sv;
  array arr;
  if (doc.at_key("input").get(in) || in.is_null()) {
    return Bad("'input' is required: a string or an array of strings", "input");
  }
  if (!in.get_string().get(sv)) {
    if (sv.empty()) return Bad("'input' is an empty string", "input");
    AddInput(out, sv, "", false);
  } else if (!in.get_array().get(arr)) {
    if (auto err = CheckCount(arr.size(), "input", max_inputs)) return err;
    size_t i = 0;
    for (element e : arr) {
      const std::string at = "'input[" + std::to_string(i) + "]'";
      if (e.get_string().get(sv)) return Bad(at + " must be a string", "input");
      if (sv.empty()) return Bad(at + " is an empty string", "input");
      AddInput(out, sv, "", false);
      ++i;
    }
  } else {
    return Bad("'input' must be a string or an array of strings", "input");
  }
  // vLLM's pooling parameter: activation false returns the raw logits in `probs`.
  bool activation = true;
  if (auto err = OptBool(doc, "activation", &activation)) return err;
  out->raw_scores = !activation;
  return OptBool(doc, "truncate", &out->truncate);
}

}  // namespace petal::gateway
