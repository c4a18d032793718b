// `petal embed` applies the model's sentence-transformers prompts with the gateway's rule
// (tokenizer/prompts.h): on a copy of all-MiniLM-L6-v2 whose config names a default prompt, the
// CLI's vector for "hello" must be byte-identical to the plain model's vector for the prompted
// text. Skips without models/all-MiniLM-L6-v2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/file_util.h"
#include "shell_util.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

using testing::RunShell;

// A copy of the model folder `src` (symlinks) whose sentence-transformers config names two
// prompts and a default prompt.
fs::path PromptedCopy(const std::string& src, const std::string& prefix) {
  const fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) {
    if (e.path().filename() == "config_sentence_transformers.json") continue;
    fs::create_symlink(fs::absolute(e.path()), dir / e.path().filename());
  }
  std::ofstream(dir / "config_sentence_transformers.json")
      << R"({"prompts": {"query": "query: ", "doc": "passage: "}, "default_prompt_name": "query"})";
  return dir;
}

TEST(CliEmbed, AppliesTheModelsPromptsLikeTheGateway) {
  const std::string src = "models/all-MiniLM-L6-v2";
  if (!FileExists(src + "/model.safetensors")) GTEST_SKIP() << src << " is missing";
  const fs::path dir = PromptedCopy(src, "petal_cli_prompt_");
  const std::string bin = PETAL_BIN;
  std::string prompted, plain, named, named_plain, bad;
  ASSERT_EQ(RunShell(bin + " embed --backend cpu --model " + dir.string() + " hello", &prompted),
            0);
  ASSERT_EQ(RunShell(bin + " embed --backend cpu --model " + src + " 'query: hello'", &plain), 0);
  EXPECT_FALSE(prompted.empty());
  EXPECT_EQ(prompted, plain);
  ASSERT_EQ(
      RunShell(bin + " embed --backend cpu --prompt-name doc --model " + dir.string() + " hello",
               &named),
      0);
  ASSERT_EQ(
      RunShell(bin + " embed --backend cpu --model " + src + " 'passage: hello'", &named_plain), 0);
  EXPECT_EQ(named, named_plain);
  EXPECT_NE(named, prompted);
  EXPECT_NE(RunShell(bin + " embed --backend cpu --prompt-name nope --model " + dir.string() +
                         " hello 2>/dev/null",
                     &bad),
            0);
  fs::remove_all(dir);
}

TEST(CliInfo, ReportsModelTypeInt8ModeAndPrompts) {
  const std::string src = "models/all-MiniLM-L6-v2";
  if (!FileExists(src + "/model.safetensors")) GTEST_SKIP() << src << " is missing";
  const fs::path dir = PromptedCopy(src, "petal_cli_info_");
  std::string json;
  ASSERT_EQ(RunShell(std::string(PETAL_BIN) + " info --json --model " + dir.string(), &json), 0);
  EXPECT_NE(json.find(R"("model_type":"bert")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("int8_mode":"linear")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("default_prompt_name":"query")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("prompts":{"doc":"passage: ","query":"query: "})"), std::string::npos)
      << json;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace petal
