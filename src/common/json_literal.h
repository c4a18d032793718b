// A string as a JSON string literal, for the hand-written JSON that Petal emits (results files,
// manifests, `petal info --json`, OTLP spans, fp8 scales): quotes included, `"` and `\` escaped,
// control characters as \u00XX, everything else (UTF-8 included) byte for byte.
// Thread-safety: pure functions, no shared state.
#pragma once

#include <string>
#include <string_view>

namespace petal {

// Appends the literal for `s` to `*out`.
void AppendJsonLiteral(std::string* out, std::string_view s);

// The literal for `s`.
std::string JsonLiteral(std::string_view s);

}  // namespace petal
