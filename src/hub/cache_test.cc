// Tests of the huggingface_hub cache layout: refs, relative snapshot links, model folder check.
#include "hub/cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace petal::hub {
namespace {
namespace fs = std::filesystem;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

std::string FreshDir(const std::string& name) {
  const std::string d = testing::TempDir() + "/" + name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(HubCache, Paths) {
  HubCache c("/c");
  EXPECT_EQ(c.RepoDir("o/n"), "/c/models--o--n");
  EXPECT_EQ(c.SnapshotDir("o/n", kCommit), "/c/models--o--n/snapshots/" + kCommit);
  EXPECT_EQ(c.BlobPath("o/n", "abc"), "/c/models--o--n/blobs/abc");
  EXPECT_EQ(c.LockPath("o/n", "abc"), "/c/.locks/models--o--n/abc.lock");
}

TEST(HubCache, RefsRoundTrip) {
  HubCache c(FreshDir("hub_cache_refs"));
  EXPECT_EQ(c.ResolveRevision("o/n", "main").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*c.ResolveRevision("o/n", kCommit), kCommit);  // a commit needs no ref
  ASSERT_TRUE(c.WriteRef("o/n", "main", kCommit).ok());
  ASSERT_TRUE(c.WriteRef("o/n", "refs/pr/1", kCommit).ok());
  EXPECT_EQ(*c.ResolveRevision("o/n", "main"), kCommit);
  EXPECT_EQ(*c.ResolveRevision("o/n", "refs/pr/1"), kCommit);
  // huggingface_hub writes the bare sha, no newline.
  std::ifstream f(c.RepoDir("o/n") + "/refs/main");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, kCommit);
  ASSERT_TRUE(c.WriteRef("o/n", kCommit, kCommit).ok());
  EXPECT_FALSE(fs::exists(c.RepoDir("o/n") + "/refs/" + kCommit));
  Write(c.RepoDir("o/n") + "/refs/bad", "not a sha");
  EXPECT_EQ(c.ResolveRevision("o/n", "bad").status().code(), StatusCode::kDataLoss);
}

TEST(HubCache, LinksAreRelativeLikeHuggingfaceHub) {
  HubCache c(FreshDir("hub_cache_links"));
  Write(c.BlobPath("o/n", "e1"), "{}");
  Write(c.BlobPath("o/n", "e2"), "pool");
  ASSERT_TRUE(c.Link("o/n", kCommit, "config.json", "e1").ok());
  ASSERT_TRUE(c.Link("o/n", kCommit, "1_Pooling/config.json", "e2").ok());
  const fs::path snap = c.SnapshotDir("o/n", kCommit);
  EXPECT_EQ(fs::read_symlink(snap / "config.json").string(), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(snap / "1_Pooling/config.json").string(), "../../../blobs/e2");
  EXPECT_TRUE(c.HasFile("o/n", kCommit, "1_Pooling/config.json"));
  EXPECT_FALSE(c.HasFile("o/n", kCommit, "model.safetensors"));
  // Relinking replaces the old link; a dangling link is not a file.
  ASSERT_TRUE(c.Link("o/n", kCommit, "config.json", "e2").ok());
  EXPECT_EQ(fs::read_symlink(snap / "config.json").string(), "../../blobs/e2");
  fs::create_symlink("../../blobs/missing", snap / "model.safetensors");
  EXPECT_FALSE(c.HasFile("o/n", kCommit, "model.safetensors"));
}

TEST(CheckModelFolder, NamesWhatIsMissing) {
  const std::string d = FreshDir("hub_check_folder");
  auto st = CheckModelFolder(d);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("config.json"), std::string::npos);
  EXPECT_NE(st.message().find("*.safetensors"), std::string::npos);
  Write(d + "/config.json", "{}");
  Write(d + "/model.safetensors", "x");
  EXPECT_TRUE(CheckModelFolder(d).ok());
  Write(d + "/model.safetensors.index.json",
        R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
           "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})");
  Write(d + "/model-00001-of-00002.safetensors", "x");
  st = CheckModelFolder(d);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_EQ(st.message().find("model-00001-of-00002"), std::string::npos) << st.message();
  Write(d + "/model-00002-of-00002.safetensors", "x");
  EXPECT_TRUE(CheckModelFolder(d).ok());
}

TEST(FileLock, SerialisesHolders) {
  const std::string path = FreshDir("hub_lock") + "/x/e.lock";
  auto a = FileLock::Acquire(path);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(fs::exists(path));
}

}  // namespace
}  // namespace petal::hub
