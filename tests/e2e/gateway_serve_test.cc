// End-to-end test of `petal serve` as a user runs it: the binary starts replica processes with
// the FakeEngine and the gateway, answers HTTP, and on SIGTERM stops its children and exits 0.
// A second test runs the same supervisor with two real CPU-engine replicas (the path `--gpus`
// takes on a GPU machine, one replica per device) and checks that the gateway spreads requests
// over both; a third runs two replicas in the gateway's process (`--replica-transport local`)
// and compares their answers with a replica process's; a fourth checks what the default
// transport (auto) picks; a fifth checks that `--gpus` without a GPU fails clearly. Needs
// models/all-MiniLM-L6-v2 (skipped if absent).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/file_util.h"
#include "gateway_test_util.h"

namespace petal::gateway {
namespace {

using namespace testing;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(GatewayServe, StartsReplicasServesAndStopsCleanly) {
  const std::string model = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(model + "/tokenizer.json")) GTEST_SKIP() << model << " is missing";
  const std::string log = ::testing::TempDir() + "/gateway_serve_test.log";
  ::unlink(log.c_str());  // a previous run's log must not be mistaken for this one's
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    execl(PETAL_BIN, "petal", "serve", "--model", model.c_str(), "--fake-engine", "--replicas", "2",
          "--listen", "127.0.0.1:0", "--shutdown-grace-ms", "1000", nullptr);
    _exit(127);
  }
  // The gateway logs its port once every replica is serving.
  int port = 0;
  const std::regex re("gateway listening.* port=([0-9]+)");
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, re)) port = std::stoi(m[1]);
    if (port == 0) std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(port, 0) << ReadFile(log);
  std::vector<pid_t> children;
  const std::regex child_re("replica started\" pid=([0-9]+)");
  const std::string text = ReadFile(log);
  for (std::sregex_iterator it(text.begin(), text.end(), child_re), end; it != end; ++it) {
    children.push_back(std::stoi((*it)[1]));
  }
  EXPECT_EQ(children.size(), 2u) << text;
  // Several fake replicas: the default transport (auto) runs them as processes on Unix sockets in
  // a private folder, removed on the way out.
  std::smatch sock;
  const bool unix_sockets =
      std::regex_search(text, sock, std::regex("servers=unix:(/tmp/petal-serve-[A-Za-z0-9]+)/"));
  EXPECT_TRUE(unix_sockets) << text;
  const std::string socket_dir = unix_sockets ? sock[1].str() : "";
  if (unix_sockets) {
    EXPECT_TRUE(std::filesystem::exists(socket_dir + "/replica-1.sock")) << socket_dir;
  }
  {
    HttpClient c(static_cast<uint16_t>(port));
    EXPECT_EQ(c.Get("/ready").status, 200u);
    auto r = c.Post("/v1/embeddings", "{\"input\":[[1,2,3],[4,5]]}");
    EXPECT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(Embeddings(r.body).size(), 2u);
  }
  // A replica killed outright is restarted on its port and rejoins; requests keep succeeding.
  if (children.size() == 2) {
    kill(children[0], SIGKILL);
    HttpClient c(static_cast<uint16_t>(port));
    int restarted = 0;
    for (int i = 0; i < 100 && restarted < 3; ++i) {
      std::this_thread::sleep_for(50ms);
      const std::string now = ReadFile(log);
      restarted = static_cast<int>(std::distance(
          std::sregex_iterator(now.begin(), now.end(), child_re), std::sregex_iterator()));
      EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2,3]]}").status, 200u);
    }
    EXPECT_EQ(restarted, 3) << ReadFile(log);
    bool both_up = false;
    for (int i = 0; i < 100 && !both_up; ++i) {
      std::this_thread::sleep_for(50ms);
      const auto info = c.Get("/info").body;
      both_up = info.find("\"up\":false") == std::string::npos;
    }
    EXPECT_TRUE(both_up) << c.Get("/info").body;
    const std::string now = ReadFile(log);
    children.clear();
    for (std::sregex_iterator it(now.begin(), now.end(), child_re), end; it != end; ++it) {
      children.push_back(std::stoi((*it)[1]));
    }
  }
  kill(pid, SIGTERM);
  int status = -1;
  for (int i = 0; i < 200; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(WIFEXITED(status)) << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Children are reaped by `petal serve`, so kill(pid, 0) fails for each (the restarted one too).
  for (pid_t c : children) EXPECT_FALSE(Alive(c)) << "replica " << c << " still running";
  if (!socket_dir.empty()) {
    EXPECT_FALSE(std::filesystem::exists(socket_dir)) << socket_dir;
  }
}

struct Started {
  pid_t pid = -1;
  int port = 0;          // 0: no gateway within ~30 s
  int exit_status = -1;  // waitpid status when it exited while starting, else -1
};

// Starts `petal serve ARGS...` with stderr to `log` and waits for its gateway.
Started StartServe(const std::vector<std::string>& args, const std::string& log) {
  ::unlink(log.c_str());
  std::vector<std::string> all = {"petal", "serve"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    execv(PETAL_BIN, argv.data());
    _exit(127);
  }
  Started s{pid};
  const std::regex re("gateway listening.* port=([0-9]+)");
  for (int i = 0; i < 600 && s.port == 0; ++i) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, re)) s.port = std::stoi(m[1]);
    int status;
    if (s.port == 0 && waitpid(pid, &status, WNOHANG) == pid) {
      s.exit_status = status;
      break;
    }
    if (s.port == 0) std::this_thread::sleep_for(50ms);
  }
  return s;
}

int StopServe(pid_t pid) {
  kill(pid, SIGTERM);
  int status = -1;
  for (int i = 0; i < 400; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(50ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

TEST(GatewayServe, TwoCpuReplicasShareTheLoad) {
  const std::string model = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(model + "/model.safetensors")) GTEST_SKIP() << model << " is missing";
  const std::string log = ::testing::TempDir() + "/gateway_serve_cpu_replicas.log";
  // Loopback TCP between gateway and replicas here (the other test covers Unix sockets).
  auto [pid, port, exited] =
      StartServe({"--model", model, "--backend", "cpu", "--replicas", "2", "--listen",
                  "127.0.0.1:0", "--shutdown-grace-ms", "1000", "--replica-transport", "tcp"},
                 log);
  ASSERT_GT(pid, 0);
  ASSERT_NE(port, 0) << ReadFile(log);
  const std::string text = ReadFile(log);
  EXPECT_TRUE(std::regex_search(text, std::regex("servers=127\\.0\\.0\\.1:[0-9]+,127"))) << text;
  const std::regex child_re("replica started\" pid=([0-9]+)");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), child_re),
                          std::sregex_iterator()),
            2)
      << text;
  {
    HttpClient c(static_cast<uint16_t>(port));
    std::vector<float> first;
    for (int i = 0; i < 6; ++i) {
      auto r = c.Post("/v1/embeddings", "{\"input\":\"the same sentence on every replica\"}");
      ASSERT_EQ(r.status, 200u) << r.body;
      auto e = Embeddings(r.body);
      ASSERT_EQ(e.size(), 1u);
      ASSERT_EQ(e[0].size(), 384u);
      if (first.empty()) first = e[0];
      // Both replicas run the same model: answers agree whichever replica served them.
      EXPECT_GT(Cosine(first, e[0]), 0.99999);
    }
    // Requests one at a time tie on outstanding tokens; ties rotate, so both replicas serve.
    const std::string info = c.Get("/info").body;
    const std::regex calls_re("\"calls\":([0-9]+)");
    int replicas_used = 0;
    for (std::sregex_iterator it(info.begin(), info.end(), calls_re), end; it != end; ++it) {
      replicas_used += std::stoi((*it)[1]) > 0;
    }
    EXPECT_EQ(replicas_used, 2) << info;
  }
  const int status = StopServe(pid);
  ASSERT_TRUE(WIFEXITED(status)) << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// --replica-transport local: two engines in the gateway's process (server::LocalReplica), no
// child processes. Same answers as a replica process, errors mapped the same way, both local
// replicas used, clean stop.
TEST(GatewayServe, LocalReplicasServeInProcess) {
  const std::string model = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(model + "/model.safetensors")) GTEST_SKIP() << model << " is missing";
  const std::string sentence = "{\"input\":[\"a local replica answers\",\"and another text\"]}";
  std::vector<std::vector<float>> local, process;
  for (const char* transport : {"local", "unix"}) {
    const std::string log = ::testing::TempDir() + "/gateway_serve_" + transport + ".log";
    auto [pid, port, exited] =
        StartServe({"--model", model, "--backend", "cpu", "--replicas", "2", "--listen",
                    "127.0.0.1:0", "--shutdown-grace-ms", "1000", "--replica-transport", transport},
                   log);
    ASSERT_GT(pid, 0);
    ASSERT_NE(port, 0) << ReadFile(log);
    const bool is_local = std::string(transport) == "local";
    {
      HttpClient c(static_cast<uint16_t>(port));
      for (int i = 0; i < 4; ++i) {
        auto r = c.Post("/v1/embeddings", sentence);
        ASSERT_EQ(r.status, 200u) << r.body;
        (is_local ? local : process) = Embeddings(r.body);
      }
      auto bad = c.Post("/v1/embeddings", "{\"input\":5}");
      EXPECT_EQ(bad.status, 400u) << bad.body;
      if (is_local) {
        const std::string info = c.Get("/info").body;
        EXPECT_NE(info.find("local:replica-0"), std::string::npos) << info;
        EXPECT_NE(info.find("local:replica-1"), std::string::npos) << info;
        const std::regex calls_re("\"calls\":([0-9]+)");
        int used = 0;
        for (std::sregex_iterator it(info.begin(), info.end(), calls_re), end; it != end; ++it)
          used += std::stoi((*it)[1]) > 0;
        EXPECT_EQ(used, 2) << info;
        EXPECT_EQ(ReadFile(log).find("replica started"), std::string::npos)
            << "local mode must not start child processes";
      }
    }
    const int status = StopServe(pid);
    ASSERT_TRUE(WIFEXITED(status)) << ReadFile(log);
    EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(log);
  }
  ASSERT_EQ(local.size(), 2u);
  ASSERT_EQ(process.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_GT(Cosine(local[i], process[i]), 0.999999);
}

// --replica-transport auto (the default): one CPU engine runs in the gateway's process; several
// run as processes (the fake-engine test above).
TEST(GatewayServe, AutoTransportRunsOneCpuEngineLocally) {
  const std::string model = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(model + "/model.safetensors")) GTEST_SKIP() << model << " is missing";
  const std::string log = ::testing::TempDir() + "/gateway_serve_auto.log";
  auto [pid, port, exited] = StartServe({"--model", model, "--backend", "cpu", "--listen",
                                         "127.0.0.1:0", "--shutdown-grace-ms", "1000"},
                                        log);
  ASSERT_GT(pid, 0);
  ASSERT_NE(port, 0) << ReadFile(log);
  {
    HttpClient c(static_cast<uint16_t>(port));
    auto r = c.Post("/v1/embeddings", "{\"input\":\"one engine, no child process\"}");
    EXPECT_EQ(r.status, 200u) << r.body;
  }
  const std::string text = ReadFile(log);
  EXPECT_NE(text.find("transport=local"), std::string::npos) << text;
  EXPECT_EQ(text.find("replica started"), std::string::npos) << text;
  const int status = StopServe(pid);
  ASSERT_TRUE(WIFEXITED(status)) << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(log);
}

TEST(GatewayServe, GpusWithoutAGpuFailsClearly) {
  if (::access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "a GPU is present";
  const std::string log = ::testing::TempDir() + "/gateway_serve_gpus.log";
  auto [pid, port, status] = StartServe({"--gpus", "all", "--listen", "127.0.0.1:0"}, log);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << ReadFile(log);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(ReadFile(log).find("no CUDA device is visible"), std::string::npos) << ReadFile(log);
}

}  // namespace
}  // namespace petal::gateway
