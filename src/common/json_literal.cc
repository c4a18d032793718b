#include "common/json_literal.h"

#include <cstdio>

namespace petal {

void AppendJsonLiteral(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      *out += buf;
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

std::string JsonLiteral(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendJsonLiteral(&out, s);
  return out;
}

}  // namespace petal
