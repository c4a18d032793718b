// Process-level test of `petal server`: starts the binary with the FakeEngine on a loopback
// port, sends SIGTERM while requests are in flight, and checks they all complete, the server
// refuses new work afterwards and the process exits 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "wire/client.h"

#ifndef PETAL_BIN
#error "PETAL_BIN must name the petal binary"
#endif

namespace petal::server {
namespace {

using namespace std::chrono_literals;

// Reads the bound port from the server's "serving" log line.
int WaitForPort(const std::string& log_path) {
  const std::regex re("msg=\"serving\".* port=([0-9]+)");
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::smatch m;
    const std::string text = ss.str();
    if (std::regex_search(text, m, re)) return std::stoi(m[1]);
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

TEST(ServerProcess, SigtermDrainsInFlightWorkAndExitsZero) {
  const std::string log_path = "/tmp/petal_sigterm_test_" + std::to_string(getpid()) + ".log";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = std::freopen(log_path.c_str(), "w", stderr);
    (void)f;
    // 400 ms per batch, one sequence per batch: four requests take ~1.6 s to drain.
    execl(PETAL_BIN, PETAL_BIN, "server", "--fake-engine", "--fake-latency-us", "400000",
          "--listen", "127.0.0.1:0", "--max-batch-seqs", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  const int port = WaitForPort(log_path);
  ASSERT_GT(port, 0) << "server did not start; see " << log_path;
  wire::EmbedClient client("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(client.WaitUntilServing(5s));
  std::vector<std::unique_ptr<wire::PendingCall>> calls;
  for (int i = 0; i < 4; ++i)
    calls.push_back(client.StartEmbed(wire::MakeEmbedRequest({{i + 1, 7, 8}}), 10000ms));
  // SIGTERM once all four are admitted; at 400 ms per batch most are still queued or running.
  uint32_t in_flight = 0;
  bool admitted = false;
  for (int i = 0; i < 400 && !admitted; ++i) {
    auto st = client.Stats();
    admitted = st.ok() && st->requests() == 4;
    if (admitted) in_flight = st->queue_requests();
    if (!admitted) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(admitted);
  EXPECT_GE(in_flight, 1u) << "nothing left to drain; the test proves little";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  for (auto& c : calls) {
    auto r = c->Wait();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(client.Embed(wire::MakeEmbedRequest({{1}}), 1000ms).ok());  // nobody listening now
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("msg=\"stopped\""), std::string::npos) << ss.str();
  std::remove(log_path.c_str());
}

}  // namespace
}  // namespace petal::server
