// Tests of --model values: local paths pass through unchanged, hub ids go to the hub cache.
#include "cli/model_arg.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace petal::cli {
namespace {
namespace fs = std::filesystem;

TEST(ResolveModelArg, LocalPathsAreUnchanged) {
  // Run from the source tree (CTest's working directory): models/ and src/ are local folders.
  for (const char* local : {"models/all-MiniLM-L6-v2", "models/not-fetched-yet", "src/hub",
                            "./org/name", "/abs/org", "~/org/name", "plain", ""}) {
    auto r = ResolveModelArg(local);
    ASSERT_TRUE(r.ok()) << local << ": " << r.status().ToString();
    EXPECT_EQ(*r, local);
  }
}

TEST(ResolveModelArg, HubIdsGoThroughTheCache) {
  const std::string cache = testing::TempDir() + "/model_arg_cache";
  fs::remove_all(cache);
  setenv("HF_HUB_CACHE", cache.c_str(), 1);
  setenv("HF_HUB_OFFLINE", "1", 1);
  auto r = ResolveModelArg("some-org/some-model@v2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("some-org/some-model@v2 is not in the hub cache"),
            std::string::npos)
      << r.status().message();
  auto bad = ResolveModelArg("some-org/bad name");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  // A cached snapshot (laid out as huggingface_hub does) answers offline.
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  const fs::path repo = fs::path(cache) / "models--some-org--some-model";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  std::FILE* f = std::fopen((repo / "refs/v2").c_str(), "w");
  std::fputs(commit.c_str(), f);
  std::fclose(f);
  for (const char* name : {"config.json", "model.safetensors"}) {
    std::fclose(std::fopen((repo / "blobs" / name).c_str(), "w"));
    fs::create_symlink(std::string("../../blobs/") + name, repo / "snapshots" / commit / name);
  }
  std::string model = "some-org/some-model@v2", name;
  ASSERT_TRUE(ResolveModelFlag("test", &model, &name));
  EXPECT_EQ(model, (repo / "snapshots" / commit).lexically_normal().string());
  EXPECT_EQ(name, "some-org/some-model");
  unsetenv("HF_HUB_OFFLINE");
  unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace petal::cli
