// ParseInputLine: the three stdin formats of `petal embed`, and errors that name what was expected.
#include "cli/input_line.h"

#include <gtest/gtest.h>

namespace petal::cli {
namespace {

TEST(InputLine, TextIsTakenAsIs) {
  simdjson::dom::parser p;
  auto r = ParseInputLine(&p, "\"not json\" [1]", InputFormat::kText, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "\"not json\" [1]");
  EXPECT_TRUE(r->ids.empty());
}

TEST(InputLine, JsonStringIsDecoded) {
  simdjson::dom::parser p;
  auto r = ParseInputLine(&p, R"("caf\u00e9 \"x\"")", InputFormat::kJsonString, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, "caf\xc3\xa9 \"x\"");
  EXPECT_EQ(ParseInputLine(&p, "[1,2]", InputFormat::kJsonString, 10).status().message(),
            "expected a JSON string");
  EXPECT_EQ(ParseInputLine(&p, "\"open", InputFormat::kJsonString, 10).status().message(),
            "not valid JSON");
}

TEST(InputLine, TokenIdsAreCheckedAgainstTheVocabulary) {
  simdjson::dom::parser p;
  auto r = ParseInputLine(&p, "[0, 7, 9]", InputFormat::kTokenIds, 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ids, (std::vector<int32_t>{0, 7, 9}));
  EXPECT_EQ(ParseInputLine(&p, "[1, 10]", InputFormat::kTokenIds, 10).status().message(),
            "token id 10 is outside the vocabulary [0, 10)");
  EXPECT_EQ(ParseInputLine(&p, "[-1]", InputFormat::kTokenIds, 10).status().message(),
            "token id -1 is outside the vocabulary [0, 10)");
  EXPECT_EQ(ParseInputLine(&p, "[1.5]", InputFormat::kTokenIds, 10).status().message(),
            "token ids must be integers in the vocabulary [0, 10)");
  EXPECT_EQ(ParseInputLine(&p, "\"text\"", InputFormat::kTokenIds, 10).status().message(),
            "expected a JSON array of token ids");
  EXPECT_EQ(ParseInputLine(&p, "[99999999999]", InputFormat::kTokenIds, 10).status().code(),
            StatusCode::kInvalidArgument);
  auto empty = ParseInputLine(&p, "[]", InputFormat::kTokenIds, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->ids.empty());  // callers decide whether an empty sequence is an error
}

}  // namespace
}  // namespace petal::cli
