// JsonLiteral / AppendJsonLiteral: quotes and backslashes escaped, control characters as \u00XX,
// other bytes (UTF-8 included) unchanged.
#include "common/json_literal.h"

#include <gtest/gtest.h>

namespace petal {
namespace {

TEST(JsonLiteralTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonLiteral(""), "\"\"");
  EXPECT_EQ(JsonLiteral("plain"), "\"plain\"");
  EXPECT_EQ(JsonLiteral("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonLiteral(std::string("\n\t\x01\x1f", 4)), "\"\\u000a\\u0009\\u0001\\u001f\"");
  EXPECT_EQ(JsonLiteral("caf\xc3\xa9 \x7f"), "\"caf\xc3\xa9 \x7f\"");
}

TEST(JsonLiteralTest, AppendsToWhatIsThere) {
  std::string out = "{\"k\":";
  AppendJsonLiteral(&out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
}

}  // namespace
}  // namespace petal
