// Invariants every gateway body parser (src/gateway/request_parse.h) promises, checked by the
// per-route fuzz targets: an error is a 4xx with a message, a success respects max_inputs and
// holds exactly one kind of input. Thread-safety: pure functions.
#pragma once

#include <optional>

#include "fuzz_util.h"
#include "gateway/request_parse.h"

namespace petal::fuzz {

// The bound the fuzz targets pass as max_inputs: small, so the 413 path is reached too.
inline constexpr size_t kFuzzMaxInputs = 64;

inline void CheckError(const std::optional<gateway::RequestError>& err) {
  if (!err) return;
  PETAL_FUZZ_CHECK(err->http_status >= 400 && err->http_status < 500);
  PETAL_FUZZ_CHECK(!err->message.empty());
}

inline void CheckInputs(const gateway::Inputs& in) {
  PETAL_FUZZ_CHECK(in.size() >= 1 && in.size() <= kFuzzMaxInputs);
  PETAL_FUZZ_CHECK(in.pretokenized ? in.texts.empty() : in.ids.empty());
  for (const auto& seq : in.ids) {
    for (int32_t id : seq) PETAL_FUZZ_CHECK(id >= 0);
  }
}

}  // namespace petal::fuzz
