#include "gateway/request_json.h"

#include <algorithm>
#include <bit>
#include <memory>

#include "common/recycler.h"

namespace petal::gateway {

struct ParsedBody {
  simdjson::dom::parser parser;
};

namespace request_json {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

RequestError Bad(std::string message, std::string param) {
  return {400, std::move(message), std::move(param)};
}

std::optional<RequestError> CheckCount(size_t n, const std::string& field, size_t max_inputs) {
  if (n == 0) return Bad("'" + field + "' must not be empty", field);
  if (n > max_inputs) {
    return RequestError{413,
                        "'" + field + "' has " + std::to_string(n) + " items; at most " +
                            std::to_string(max_inputs) + " are allowed",
                        field};
  }
  return std::nullopt;
}

namespace {

std::optional<RequestError> ParseWith(simdjson::dom::parser& parser, std::string_view body,
                                      object* doc) {
  element root;
  if (auto err = parser.parse(body.data(), body.size(), true).get(root)) {
    return Bad(std::string("request body is not valid JSON: ") + simdjson::error_message(err), "");
  }
  if (root.get_object().get(*doc)) return Bad("request body must be a JSON object", "");
  return std::nullopt;
}

// Parsers held by requests (ParsedBodyHold), kept with their buffers for the next ones. A parser
// needs ~16 bytes per byte of its capacity; those sized for bodies over 128 KiB are freed.
Recycler<std::unique_ptr<ParsedBody>>& Parsers() {
  static auto* parsers = new Recycler<std::unique_ptr<ParsedBody>>(
      {.max_kept = 64,
       .max_bytes = size_t{2} << 20,
       .max_total_bytes = size_t{32} << 20,
       .bytes = [](const std::unique_ptr<ParsedBody>& b) { return 16 * b->parser.capacity(); }});
  return *parsers;
}

}  // namespace

std::optional<RequestError> ParseBody(std::string_view body, object* doc) {
  thread_local simdjson::dom::parser parser;
  return ParseWith(parser, body, doc);
}

std::optional<RequestError> ParseBody(std::string_view body, object* doc, ParsedBodyHold* hold) {
  std::unique_ptr<ParsedBody> taken = Parsers().Take();
  if (!taken) taken = std::make_unique<ParsedBody>();
  hold->reset(taken.release());
  simdjson::dom::parser& parser = (*hold)->parser;
  // Sized up front in powers of two (at least 4 KiB), so that bodies of varying length reuse
  // one allocation instead of growing it byte by byte.
  if (parser.capacity() < body.size()) {
    const size_t capacity = std::bit_ceil(std::max<size_t>(body.size(), 4096));
    auto err = parser.allocate(capacity);
    (void)err;  // on failure the parse below reports it
  }
  return ParseWith(parser, body, doc);
}

bool TokenId(element e, int32_t* id) {
  int64_t v;
  if (e.get_int64().get(v) || v < 0 || v > INT32_MAX) return false;
  *id = static_cast<int32_t>(v);
  return true;
}

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
  if (auto err = CheckCount(arr.size(), f, max_inputs)) return err;
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

}  // namespace request_json

void ParsedBodyRelease::operator()(ParsedBody* b) const noexcept {
  request_json::Parsers().Give(std::unique_ptr<ParsedBody>(b));
}

}  // namespace petal::gateway
