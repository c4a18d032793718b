// Tests of hub id parsing, settings from the environment, digests and progress formatting.
#include "hub/hub_id.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "hub/digest.h"
#include "hub/progress.h"

namespace petal::hub {
namespace {

TEST(HubId, ParsesRepoAndRevision) {
  auto a = ParseHubId("sentence-transformers/all-MiniLM-L6-v2");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->repo, "sentence-transformers/all-MiniLM-L6-v2");
  EXPECT_EQ(a->revision, "main");
  auto b = ParseHubId("BAAI/bge-small-en-v1.5@v1.0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->repo, "BAAI/bge-small-en-v1.5");
  EXPECT_EQ(b->revision, "v1.0");
  auto c = ParseHubId("Qwen/Qwen3-Embedding-0.6B@refs/pr/3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->revision, "refs/pr/3");
}

TEST(HubId, RejectsMalformedIds) {
  for (const char* bad :
       {"", "noslash", "a/b/c", "/name", "org/", "org/.hidden", "org/na me", "org/a..b",
        "-org/name", "org/name@", "org/name@/x", "org/name@a..b", "org/name@a b"}) {
    auto r = ParseHubId(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(HubId, LooksLikeHubIdAndCommitHash) {
  EXPECT_TRUE(LooksLikeHubId("org/name"));
  EXPECT_TRUE(LooksLikeHubId("org/name@main"));
  EXPECT_FALSE(LooksLikeHubId("models/a/b"));
  EXPECT_FALSE(LooksLikeHubId("./models/x"));
  EXPECT_FALSE(LooksLikeHubId("plain"));
  EXPECT_TRUE(IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("main"));
  EXPECT_EQ(RepoFolderName("BAAI/bge-small-en-v1.5"), "models--BAAI--bge-small-en-v1.5");
}

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* n : kNames) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(n);
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved_) {
      if (v) {
        setenv(n, v->c_str(), 1);
      } else {
        unsetenv(n);
      }
    }
  }

 private:
  static constexpr const char* kNames[] = {"HF_ENDPOINT",
                                           "HF_TOKEN",
                                           "HF_TOKEN_PATH",
                                           "HF_HOME",
                                           "HF_HUB_CACHE",
                                           "HUGGINGFACE_HUB_CACHE",
                                           "XDG_CACHE_HOME",
                                           "HF_HUB_OFFLINE",
                                           "HF_HUB_DISABLE_PROGRESS_BARS",
                                           "HOME"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST(HubSettings, DefaultsLikeHuggingfaceHub) {
  EnvGuard g;
  setenv("HOME", "/home/u", 1);
  setenv("HF_TOKEN_PATH", "/nonexistent/token", 1);
  HubSettings s = HubSettings::FromEnv();
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_EQ(s.cache_dir, "/home/u/.cache/huggingface/hub");
  EXPECT_TRUE(s.token.empty());
  EXPECT_FALSE(s.offline);
  EXPECT_TRUE(s.progress);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(HubSettings::FromEnv().cache_dir, "/xdg/huggingface/hub");
  setenv("HF_HOME", "/hf", 1);
  EXPECT_EQ(HubSettings::FromEnv().cache_dir, "/hf/hub");
  setenv("HF_HUB_CACHE", "/cache", 1);
  EXPECT_EQ(HubSettings::FromEnv().cache_dir, "/cache");
}

TEST(HubSettings, ReadsEndpointTokenOffline) {
  EnvGuard g;
  setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
  setenv("HF_TOKEN", " hf_abc\n", 1);
  setenv("HF_HUB_OFFLINE", "true", 1);
  setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1", 1);
  HubSettings s = HubSettings::FromEnv();
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(s.token, "hf_abc");
  EXPECT_TRUE(s.offline);
  EXPECT_FALSE(s.progress);
  setenv("HF_HUB_OFFLINE", "0", 1);
  EXPECT_FALSE(HubSettings::FromEnv().offline);
}

TEST(HubSettings, ReadsTokenFile) {
  EnvGuard g;
  const std::string path = testing::TempDir() + "/hub_token_test";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("hf_fromfile\n", f);
    std::fclose(f);
  }
  setenv("HF_TOKEN_PATH", path.c_str(), 1);
  EXPECT_EQ(HubSettings::FromEnv().token, "hf_fromfile");
}

TEST(Digest, KnownVectors) {
  // FIPS 180-2 test vector and `printf 'hello\n' | git hash-object --stdin`.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(GitBlobSha1Hex("hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(GitBlobSha1Hex(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  const std::string path = testing::TempDir() + "/hub_digest_test";
  std::string data(3 << 20, '\0');
  uint32_t x = 12345;
  for (char& c : data) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
  EXPECT_EQ(*Sha256OfFile(path), Sha256Hex(data));
  EXPECT_EQ(*GitBlobSha1OfFile(path), GitBlobSha1Hex(data));
  EXPECT_FALSE(Sha256OfFile(path + ".missing").ok());
}

TEST(Progress, LogLinesWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  {
    Progress p("org/m model.safetensors", 40'000'000, true, f);
    for (int64_t b = 0; b <= 40'000'000; b += 5'000'000) p.Update(b);
    p.Finish("sha256 verified");
    Progress small("org/m config.json", 600, true, f);
    small.Update(600);
    small.Finish("git sha1 verified");
  }
  std::rewind(f);
  std::string out(4096, '\0');
  out.resize(std::fread(out.data(), 1, out.size(), f));
  std::fclose(f);
  EXPECT_NE(out.find("downloading org/m model.safetensors (40.0 MB)"), std::string::npos) << out;
  EXPECT_NE(out.find("25% (10.0 MB of 40.0 MB)"), std::string::npos) << out;
  EXPECT_NE(out.find("75%"), std::string::npos) << out;
  EXPECT_NE(out.find("model.safetensors (40.0 MB) done"), std::string::npos) << out;
  EXPECT_NE(out.find("sha256 verified"), std::string::npos) << out;
  // A small file: its end line only.
  EXPECT_EQ(out.find("downloading org/m config.json"), std::string::npos) << out;
  EXPECT_NE(out.find("org/m config.json (600 B) done"), std::string::npos) << out;
  EXPECT_EQ(Progress::Bytes(999), "999 B");
  EXPECT_EQ(Progress::Bytes(90868376), "90.9 MB");
}

}  // namespace
}  // namespace petal::hub
