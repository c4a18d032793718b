// JSON string helpers (see json_text.h).
#include "tokenizer/json_text.h"

#include <simdjson.h>

#include <cstdio>

namespace petal {

Status DecodeJsonStringLine(std::string_view line, std::string* out) {
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(line);
  simdjson::dom::element el;
  if (auto err = parser.parse(padded).get(el)) {
    return InvalidArgument(std::string("not a JSON line: ") + simdjson::error_message(err));
  }
  std::string_view s;
  if (el.get_string().get(s)) return InvalidArgument("JSON line is not a string");
  out->assign(s);
  return Status::Ok();
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

}  // namespace petal
