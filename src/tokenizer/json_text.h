// JSON string helpers for tools that speak JSON Lines (`petal tokenize`, parity checkers):
// decode one line holding a JSON string, and append a string as an escaped JSON literal.
// Thread-safety: pure functions; DecodeJsonStringLine uses a thread-local parser.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace petal {

// Decodes `line` (a JSON string literal, surrounding whitespace allowed) into *out.
Status DecodeJsonStringLine(std::string_view line, std::string* out);
// Appends `s` to *out as a JSON string literal (quotes included).
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace petal
