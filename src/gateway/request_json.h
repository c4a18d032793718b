// JSON field helpers shared by the request parsers (request_parse.cc, request_parse_rank.cc):
// each checks one field and, when it is wrong, returns a 400 RequestError naming it. Internal to
// the gateway's parsing library. Thread-safety: ParseBody uses a thread-local parser; the rest
// are pure.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "gateway/request_parse.h"

namespace petal::gateway::request_json {

// A 400 with `message`, naming `param`.
RequestError Bad(std::string message, std::string param);
// An array field's item count: 0 is a 400, more than max_inputs a 413, each naming `field`.
std::optional<RequestError> CheckCount(size_t n, const std::string& field, size_t max_inputs);
// Parses `body` into `*doc` with this thread's parser (valid until the next parse on the thread).
std::optional<RequestError> ParseBody(std::string_view body, simdjson::dom::object* doc);
// As ParseBody, with a parser from the recycled list that `*hold` then holds: `*doc` and the
// strings viewed in it are valid as long as `*hold` is.
std::optional<RequestError> ParseBody(std::string_view body, simdjson::dom::object* doc,
                                      ParsedBodyHold* hold);
// A non-negative integer token id that fits int32.
bool TokenId(simdjson::dom::element e, int32_t* id);
// `field`: a string, an array of strings, an array of token ids (if allow_ids), or an array of
// such arrays; at most max_inputs of them (else a 413). Texts are appended as views into `e`'s
// document: the caller keeps it alive (Inputs::body) or copies them before the next parse.
std::optional<RequestError> ParseInputs(simdjson::dom::element e, const char* field,
                                        size_t max_inputs, bool allow_ids, Inputs* out);
// Optional fields: absent or null leaves *out as it is.
std::optional<RequestError> OptString(const simdjson::dom::object& o, const char* key,
                                      std::string* out);
std::optional<RequestError> OptBool(const simdjson::dom::object& o, const char* key, bool* out);

}  // namespace petal::gateway::request_json
