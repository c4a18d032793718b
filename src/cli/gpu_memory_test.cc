// gpu_memory.h: the weights' estimate from safetensors headers and the fit check's answer.
#include "cli/gpu_memory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "model/safetensors_writer.h"

namespace petal::cli {
namespace {

TEST(GpuMemory, WeightsCountTwoBytesPerElementWhateverTheFileDtype) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpu_memory_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<float> a(12, 0.5f);
  std::vector<uint16_t> b(5, 0x3f80);
  ASSERT_TRUE(WriteSafetensors((dir / "model.safetensors").string(),
                               {{"a", DType::kF32, {3, 4}, a.data(), {}},
                                {"b", DType::kBF16, {5}, b.data(), {}}})
                  .ok());
  ASSERT_TRUE(WriteSafetensors((dir / "extra.safetensors").string(),
                               {{"c", DType::kF32, {2, 2}, a.data(), {}}})
                  .ok());
  auto bytes = EstimateWeightBytes(dir.string());
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, 2u * (12 + 5 + 4));
  fs::remove_all(dir);
  EXPECT_EQ(EstimateWeightBytes(dir.string()).status().code(), StatusCode::kNotFound);
}

TEST(GpuMemory, FitCheckNamesEveryModelWhenTheyDoNotFit) {
  const uint64_t gib = 1ull << 30;
  const std::vector<EngineFootprint> two = {{"embedder", 2 * gib}, {"reranker", gib}};
  // 3 GiB of weights + 2 engine reserves = 5 GiB.
  EXPECT_TRUE(CheckEnginesFit(two, 5 * gib, 0).ok());
  Status s = CheckEnginesFit(two, 5 * gib - 1, 1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  for (const char* part : {"GPU 1", "embedder 2.00 GiB", "reranker 1.00 GiB", "5.00 GiB"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in: " << s.message();
  }
}

}  // namespace
}  // namespace petal::cli
