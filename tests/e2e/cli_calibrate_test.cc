// `petal calibrate` end to end on the CPU engine and the tiny Qwen3 fixture (pre-tokenized
// inputs, --ids): it prints progress and a summary, writes a fp8_scales.json that the loader
// accepts for that model and refuses for the other fixture, honours --max-texts and
// --percentile, and `--fp8-scales` without `--quantize fp8` is refused by `petal embed`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/file_util.h"
#include "model/fp8_scales.h"
#include "shell_util.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

// What the command prints on stdout and stderr.
int RunShell(const std::string& cmd, std::string* out) {
  return testing::RunShell(cmd, out, /*with_stderr=*/true);
}

std::string Fixture(const char* name) {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return std::string(s ? s : ".") + "/tests/fixtures/" + name;
}

TEST(CliCalibrate, WritesScalesTheEngineAccepts) {
  const fs::path dir = fs::temp_directory_path() / ("petal_cli_cal_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ids = (dir / "ids.jsonl").string();
  {
    std::ofstream f(ids);
    std::mt19937 rng(4);
    for (int i = 0; i < 6; ++i) {
      f << "[";
      for (int j = 0, n = 3 + 5 * i; j < n; ++j) f << (j ? "," : "") << rng() % 1000;
      f << "]\n\n";  // blank lines are skipped
    }
  }
  const std::string bin = PETAL_BIN, model = Fixture("qwen3-tiny-bidir");
  const std::string out = (dir / "scales").string();
  std::string log;
  ASSERT_EQ(RunShell(bin + " calibrate --backend cpu --ids --model " + model + " --texts " + ids +
                         " --out " + out + " --batch-tokens 20 --max-texts 5",
                     &log),
            0)
      << log;
  EXPECT_NE(log.find("[calibrate] batch 1/"), std::string::npos) << log;
  EXPECT_NE(log.find("gate_up_in"), std::string::npos) << log;
  EXPECT_NE(log.find("wrote " + out + "/fp8_scales.json"), std::string::npos) << log;

  auto config = LoadModelConfig(model);
  auto store = WeightStore::Open(model);
  ASSERT_TRUE(config.ok() && store.ok());
  auto s = LoadFp8ScalesFor(out, *config, **store);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->texts, 5);
  EXPECT_EQ(s->tokens, 3 + 8 + 13 + 18 + 23);
  EXPECT_EQ(s->backend, "cpu");
  EXPECT_EQ(s->statistic, "max");
  auto causal = LoadModelConfig(Fixture("qwen3-tiny-causal"));
  auto causal_store = WeightStore::Open(Fixture("qwen3-tiny-causal"));
  ASSERT_TRUE(causal.ok() && causal_store.ok());
  EXPECT_FALSE(LoadFp8ScalesFor(out, *causal, **causal_store).ok());

  ASSERT_EQ(RunShell(bin + " calibrate --backend cpu --ids --model " + model + " --texts " + ids +
                         " --out " + out + " --percentile 90",
                     &log),
            0)
      << log;
  s = LoadFp8ScalesFor(out, *config, **store);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->statistic, "percentile");
  EXPECT_EQ(s->percentile, 90.0);

  EXPECT_NE(RunShell(bin + " calibrate --backend cpu --ids --model " + model + " --texts " +
                         (dir / "absent.jsonl").string() + " --out " + out,
                     &log),
            0);
  EXPECT_NE(log.find("cannot open"), std::string::npos) << log;
  EXPECT_NE(RunShell(bin + " embed --backend cpu --ids --fp8-scales " + out + " --model " + model +
                         " '[1,2,3]'",
                     &log),
            0);
  EXPECT_NE(log.find("needs --quantize fp8"), std::string::npos) << log;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace petal
