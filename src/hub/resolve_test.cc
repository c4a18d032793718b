// Hub resolution end to end against tests/hub/fake_hub.py on loopback (no network): fresh
// download, cache reuse, offline hit and miss, unreachable hub, 401 / 404 messages, a transfer cut
// off half-way (resumed, verified), a resumed .incomplete file, a wrong sha256 (rejected).
// Skipped when python3 is missing.
#include "hub/resolve.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "hub/cache.h"
#include "hub/digest.h"
#include "hub/http.h"

namespace petal::hub {
namespace {
namespace fs = std::filesystem;

const char* kRepo = "test-org/tiny";

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}
std::string RandomBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>((seed = seed * 1664525u + 1013904223u) >> 24);
  return s;
}

class FakeHubTest : public testing::Test {
 protected:
  void SetUp() override {
    if (system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 missing";
    const char* src = std::getenv("PETAL_SOURCE_DIR");
    const std::string script = std::string(src ? src : ".") + "/tests/hub/fake_hub.py";
    dir_ = testing::TempDir() + "/hub_resolve_" + std::to_string(getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    root_ = dir_ + "/root";
    const std::string repo = root_ + "/" + kRepo;
    weights_ = RandomBytes(3 << 20, 7);
    Write(repo + "/config.json", R"({"model_type": "bert", "hidden_size": 8})");
    Write(repo + "/tokenizer.json", R"({"version": "1.0", "model": {"type": "WordPiece"}})");
    Write(repo + "/modules.json", "[]");
    Write(repo + "/1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true})");
    Write(repo + "/model.safetensors", weights_);
    Write(repo + "/README.md", "# not needed");
    Write(repo + "/pytorch_model.bin", "not needed");
    Write(repo + "/onnx/model.onnx", "not needed");
    Write(root_ + "/test-org/no-weights/config.json", "{}");
    Write(root_ + "/test-org/no-weights/pytorch_model.bin", "x");
    const std::string port_file = dir_ + "/port";
    pid_ = fork();
    if (pid_ == 0) {
      execlp("python3", "python3", script.c_str(), "--root", root_.c_str(), "--port-file",
             port_file.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200 && !fs::exists(port_file); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_TRUE(fs::exists(port_file)) << "fake hub did not start";
    endpoint_ = "http://127.0.0.1:" + Slurp(port_file);
    settings_.endpoint = endpoint_;
    settings_.cache_dir = dir_ + "/cache";
    settings_.progress = true;  // log lines (stderr is not a terminal under ctest)
    Log(true);
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);  // ~6 MB a test: left behind, runs filled the disk
  }
  // The fake hub's request log (and clears it).
  std::string Log(bool clear = true) {
    HttpRequest req;
    req.url = endpoint_ + "/_log" + (clear ? "?clear=1" : "");
    auto r = HttpGet(req);
    return r.ok() ? r->body : "";
  }
  void Configure(const std::string& json) { Write(root_ + "/" + kRepo + ".hub.json", json); }
  HubId Id(const std::string& rev = "main") { return HubId{kRepo, rev}; }
  std::string Snapshot(const std::string& commit) {
    return HubCache(settings_.cache_dir).SnapshotDir(kRepo, commit);
  }

  std::string dir_, root_, endpoint_, weights_;
  pid_t pid_ = -1;
  HubSettings settings_;
};

TEST_F(FakeHubTest, DownloadsOnlyModelFilesInTheHubLayout) {
  auto m = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->dir, fs::absolute(Snapshot(m->commit)).lexically_normal().string());
  EXPECT_EQ(m->files_downloaded, 5);
  EXPECT_EQ(Slurp(m->dir + "/model.safetensors"), weights_);
  EXPECT_EQ(Slurp(m->dir + "/1_Pooling/config.json"), R"({"pooling_mode_mean_tokens": true})");
  for (const char* absent : {"README.md", "pytorch_model.bin", "onnx/model.onnx"}) {
    EXPECT_FALSE(fs::exists(m->dir + "/" + absent)) << absent;
  }
  // Blobs named by sha256 (LFS) and git blob sha1 (small files), linked relatively.
  EXPECT_EQ(fs::read_symlink(m->dir + "/model.safetensors").string(),
            "../../blobs/" + Sha256Hex(weights_));
  EXPECT_EQ(fs::read_symlink(m->dir + "/config.json").string(),
            "../../blobs/" + GitBlobSha1Hex(R"({"model_type": "bert", "hidden_size": 8})"));
  EXPECT_EQ(fs::read_symlink(m->dir + "/1_Pooling/config.json").string(),
            "../../../blobs/" + GitBlobSha1Hex(R"({"pooling_mode_mean_tokens": true})"));
  EXPECT_EQ(Slurp(settings_.cache_dir + "/models--test-org--tiny/refs/main"), m->commit);
  const std::string log = Log();
  EXPECT_NE(log.find("/_cdn/" + Sha256Hex(weights_)), std::string::npos) << log;  // redirected
  EXPECT_EQ(log.find("README"), std::string::npos) << log;

  // Second run: one metadata call, nothing downloaded.
  auto again = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_downloaded, 0);
  EXPECT_EQ(again->dir, m->dir);
  const std::string log2 = Log();
  EXPECT_EQ(log2.find("resolve"), std::string::npos) << log2;
  EXPECT_EQ(log2.find("_cdn"), std::string::npos) << log2;
}

TEST_F(FakeHubTest, OfflineHitAndMiss) {
  settings_.offline = true;
  auto miss = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_NE(miss.status().message().find("HF_HUB_OFFLINE"), std::string::npos);
  EXPECT_NE(miss.status().message().find(fs::path(settings_.cache_dir).lexically_normal().string()),
            std::string::npos)
      << miss.status().message();
  settings_.offline = false;
  auto m = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Log();
  settings_.offline = true;
  auto hit = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->offline);
  EXPECT_EQ(hit->dir, m->dir);
  EXPECT_EQ(Log(), "[]");  // no request at all
  auto by_commit = ResolveHubModel(Id(m->commit), settings_);
  ASSERT_TRUE(by_commit.ok());
  EXPECT_EQ(by_commit->dir, m->dir);
  // A snapshot that lost its weights is incomplete, and said so.
  fs::remove(m->dir + "/model.safetensors");
  auto partial = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("incomplete"), std::string::npos);
  EXPECT_NE(partial.status().message().find("*.safetensors"), std::string::npos);
}

TEST_F(FakeHubTest, UnreachableHubFallsBackToTheCache) {
  HubSettings down = settings_;
  down.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  auto miss = ResolveHubModel(Id(), down);
  ASSERT_FALSE(miss.ok());
  EXPECT_NE(miss.status().message().find("could not be reached"), std::string::npos)
      << miss.status().message();
  ASSERT_TRUE(ResolveHubModel(Id(), settings_).ok());
  auto hit = ResolveHubModel(Id(), down);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->offline);
}

TEST_F(FakeHubTest, GatedAndPrivateReposNeedAToken) {
  Configure(R"({"auth": "gated", "token": "hf_secret"})");
  auto r = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("gated"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("HF_TOKEN is not set"), std::string::npos);
  settings_.token = "hf_wrong";
  r = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not accepted"), std::string::npos);
  Configure(R"({"auth": "private", "token": "hf_secret"})");
  r = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("private or gated, set HF_TOKEN"), std::string::npos)
      << r.status().message();
  settings_.token = "hf_secret";
  Log();
  auto ok = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  // The token goes to the hub, never to the CDN host the LFS file is redirected to.
  const std::string log = Log();
  const auto cdn = log.find("/_cdn/");
  ASSERT_NE(cdn, std::string::npos);
  const auto entry_end = log.find('}', cdn);
  EXPECT_NE(log.substr(cdn, entry_end - cdn).find("\"auth\": null"), std::string::npos) << log;
  EXPECT_NE(log.find("Bearer hf_secret"), std::string::npos);
}

TEST_F(FakeHubTest, BadRepoAndRevisionAre404s) {
  auto r = ResolveHubModel(HubId{"test-org/missing", "main"}, settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("test-org/missing"), std::string::npos);
  EXPECT_NE(r.status().message().find("HTTP 404"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("no repository"), std::string::npos);
  r = ResolveHubModel(Id("no-such-branch"), settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no revision 'no-such-branch'"), std::string::npos)
      << r.status().message();
  r = ResolveHubModel(HubId{"test-org/no-weights", "main"}, settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no *.safetensors"), std::string::npos);
  EXPECT_NE(r.status().message().find("pytorch_model.bin"), std::string::npos);
}

TEST_F(FakeHubTest, TagsWriteTheirRef) {
  const std::string commit = "abcdef0123456789abcdef0123456789abcdef01";
  Configure(R"({"commit": ")" + commit + R"(", "refs": {"v1": ")" + commit + R"("}})");
  auto m = ResolveHubModel(Id("v1"), settings_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->commit, commit);
  EXPECT_EQ(Slurp(settings_.cache_dir + "/models--test-org--tiny/refs/v1"), commit);
  EXPECT_FALSE(fs::exists(settings_.cache_dir + "/models--test-org--tiny/refs/main"));
}

TEST_F(FakeHubTest, CutOffTransferIsResumedAndVerified) {
  Configure(R"({"cut": {"model.safetensors": 0.5}})");
  auto m = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Slurp(m->dir + "/model.safetensors"), weights_);
  const std::string log = Log();
  // The second GET of the blob asks for the rest only.
  EXPECT_NE(log.find("\"range\": \"bytes=" + std::to_string(weights_.size() / 2) + "-\""),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(settings_.cache_dir + "/models--test-org--tiny/blobs/" +
                          Sha256Hex(weights_) + ".incomplete"));
}

TEST_F(FakeHubTest, ResumesAnIncompleteFileFromAnEarlierRun) {
  const std::string part =
      settings_.cache_dir + "/models--test-org--tiny/blobs/" + Sha256Hex(weights_) + ".incomplete";
  Write(part, weights_.substr(0, 1000));
  auto m = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(Slurp(m->dir + "/model.safetensors"), weights_);
  EXPECT_NE(Log().find("\"range\": \"bytes=1000-\""), std::string::npos);
}

TEST_F(FakeHubTest, WrongSha256IsRejected) {
  Configure(R"({"corrupt": ["model.safetensors"]})");
  auto r = ResolveHubModel(Id(), settings_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("sha256"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(Sha256Hex(weights_)), std::string::npos);
  const std::string blobs = settings_.cache_dir + "/models--test-org--tiny/blobs/";
  EXPECT_FALSE(fs::exists(blobs + Sha256Hex(weights_)));
  EXPECT_FALSE(fs::exists(blobs + Sha256Hex(weights_) + ".incomplete"));
  // Once the hub serves the right bytes, the same call succeeds.
  Configure("{}");
  auto ok = ResolveHubModel(Id(), settings_);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Slurp(ok->dir + "/model.safetensors"), weights_);
}

TEST_F(FakeHubTest, ConcurrentResolversShareOneDownload) {
  std::vector<StatusOr<ResolvedModel>> results(4, Internal("not run"));
  std::vector<std::thread> threads;
  for (auto& r : results) {
    threads.emplace_back([&r, this] { r = ResolveHubModel(Id(), settings_); });
  }
  for (auto& t : threads) t.join();
  int downloads = 0;
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Slurp(r->dir + "/model.safetensors"), weights_);
    downloads += r->files_downloaded;
  }
  EXPECT_EQ(downloads, 5);  // each file once, whoever took its lock first
  const std::string log = Log();
  size_t cdn_gets = 0;
  for (size_t p = log.find("/_cdn/"); p != std::string::npos; p = log.find("/_cdn/", p + 1)) {
    ++cdn_gets;
  }
  EXPECT_EQ(cdn_gets, 1u) << log;
}

TEST(IsModelFile, PicksWhatAModelNeeds) {
  for (const char* yes :
       {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
        "vocab.txt", "modules.json", "config_sentence_transformers.json",
        "sentence_bert_config.json", "1_Pooling/config.json", "2_Dense/config.json",
        "2_Dense/model.safetensors", "model.safetensors", "model-00001-of-00002.safetensors",
        "model.safetensors.index.json"}) {
    EXPECT_TRUE(IsModelFile(yes)) << yes;
  }
  for (const char* no : {"README.md", "pytorch_model.bin", "onnx/model.onnx",
                         "openvino/openvino_model.xml", "onnx/model.safetensors", ".gitattributes",
                         "1_Pooling/extra/config.json", "train_script.py"}) {
    EXPECT_FALSE(IsModelFile(no)) << no;
  }
}

}  // namespace
}  // namespace petal::hub
