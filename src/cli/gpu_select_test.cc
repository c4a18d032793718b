// ResolveGpus: `petal serve --gpus` specs to per-replica CUDA_VISIBLE_DEVICES values.
#include "cli/gpu_select.h"

#include <gtest/gtest.h>

namespace petal::cli {
namespace {

using V = std::vector<std::string>;

TEST(GpuSelect, AllCountAndList) {
  EXPECT_EQ(*ResolveGpus("all", 4, ""), (V{"0", "1", "2", "3"}));
  EXPECT_EQ(*ResolveGpus("2", 4, ""), (V{"0", "1"}));
  EXPECT_EQ(*ResolveGpus("3,1", 4, ""), (V{"3", "1"}));
  EXPECT_EQ(*ResolveGpus("1", 1, ""), (V{"0"}));
}

TEST(GpuSelect, IndicesAreIntoTheParentsVisibleList) {
  EXPECT_EQ(*ResolveGpus("all", 2, "4,5"), (V{"4", "5"}));
  EXPECT_EQ(*ResolveGpus("1", 2, "4,5"), (V{"4"}));
  EXPECT_EQ(*ResolveGpus("1,0", 2, "GPU-aa,GPU-bb"), (V{"GPU-bb", "GPU-aa"}));
}

TEST(GpuSelect, ZeroMeansNoGpuReplicasEvenWithoutAGpu) {
  EXPECT_TRUE(ResolveGpus("0", 0, "")->empty());
  EXPECT_TRUE(ResolveGpus("0", 8, "")->empty());
}

TEST(GpuSelect, NoGpuIsAFailedPrecondition) {
  for (const char* spec : {"all", "1", "0,1"}) {
    auto r = ResolveGpus(spec, 0, "");
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << spec;
    EXPECT_NE(r.status().message().find("no CUDA device is visible"), std::string::npos);
  }
}

TEST(GpuSelect, BadSpecsAreInvalidArguments) {
  for (const char* spec : {"5", "0,4", "1,1", "x", "1,,2", "-1", ""}) {
    auto r = ResolveGpus(spec, 4, "");
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << spec;
  }
}

}  // namespace
TEST(DeviceIndexOf, PositionInParentListOrTheIndexItself) {
  EXPECT_EQ(*DeviceIndexOf("3", ""), 3);
  EXPECT_EQ(*DeviceIndexOf("5", "4,5"), 1);
  EXPECT_EQ(*DeviceIndexOf("GPU-ab", "GPU-cd,GPU-ab"), 1);
  EXPECT_FALSE(DeviceIndexOf("7", "4,5").ok());
  EXPECT_FALSE(DeviceIndexOf("x", "").ok());
}

}  // namespace petal::cli
