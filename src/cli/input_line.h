// One input line of `petal embed` (stdin mode): raw text, a JSON string (--json), or a JSON array
// of token ids (--ids). Shared by the engine path (cmd_embed.cc) and inference-free queries
// (embed_query.cc), which differ only in what they check afterwards.
// Thread-safety: ParseInputLine uses the caller's parser; one parser per thread.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace petal::cli {

enum class InputFormat { kText, kJsonString, kTokenIds };

struct InputLine {
  std::string text;          // kText and kJsonString
  std::vector<int32_t> ids;  // kTokenIds: every id in [0, vocab_size)
};

// Parses `line` as `format`. Token ids must be integers in [0, vocab_size); errors name what was
// expected.
StatusOr<InputLine> ParseInputLine(simdjson::dom::parser* parser, std::string_view line,
                                   InputFormat format, int64_t vocab_size);

}  // namespace petal::cli
