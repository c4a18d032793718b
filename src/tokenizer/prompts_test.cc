// Tests for the sentence-transformers prompt rule shared by the gateway and `petal embed`.
#include "tokenizer/prompts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace petal {
namespace {

std::string TempModelDir(const std::string& json) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("petal_prompts_" + std::to_string(std::hash<std::string>{}(json)));
  std::filesystem::create_directories(dir);
  if (!json.empty()) std::ofstream(dir / "config_sentence_transformers.json") << json;
  return dir.string();
}

TEST(Prompts, NameThenInputTypeThenDefault) {
  auto p = Prompts::Load(TempModelDir(
      R"({"prompts": {"query": "query: ", "document": "passage: ", "n": 3},
          "default_prompt_name": "document"})"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->by_name.size(), 2u);                       // the non-string entry is ignored
  EXPECT_EQ(*p->Prefix("query", "document"), "query: ");  // an explicit name wins
  EXPECT_EQ(*p->Prefix("", "query"), "query: ");
  EXPECT_EQ(*p->Prefix("", "classification"), "passage: ");  // unknown type: the default
  EXPECT_EQ(*p->Prefix(""), "passage: ");
  auto bad = p->Prefix("nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'prompt_name' nope"), std::string::npos);
}

TEST(Prompts, NoFileOrNoDefaultMeansNoPrefix) {
  auto none = Prompts::Load(TempModelDir(""));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none->Prefix("", "query"), "");
  EXPECT_FALSE(none->Prefix("query").ok());
  auto no_default = Prompts::Load(TempModelDir(R"({"prompts": {"query": "q: "}})"));
  ASSERT_TRUE(no_default.ok());
  EXPECT_EQ(*no_default->Prefix(""), "");
  EXPECT_EQ(*no_default->Prefix("", "query"), "q: ");
  EXPECT_FALSE(Prompts::Load(TempModelDir("{not json")).ok());
}

}  // namespace
}  // namespace petal
