// The child processes of `petal serve` (see serve_children.h).
#include "cli/serve_children.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <thread>

#include "common/log.h"

namespace petal::cli {
namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  // Everything the child needs is prepared before fork: after fork in a multi-threaded process
  // the child may only call async-signal-safe functions (no allocation) until exec.
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;  // parent (or -1)
  // Child: die with the parent even if it is killed without a chance to forward signals.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (env.empty()) {
    execv("/proc/self/exe", argv.data());
  } else {
    execve("/proc/self/exe", argv.data(), envp.data());
  }
  _exit(127);
}

}  // namespace

int FreePort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io);
  boost::system::error_code ec;
  boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), 0);
  a.open(ep.protocol(), ec);
  if (!ec) a.bind(ep, ec);
  return ec ? 0 : a.local_endpoint().port();
}

std::vector<std::string> EnvWith(const std::string& key, const std::string& value) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind(key + "=", 0) != 0) env.emplace_back(*e);
  }
  env.push_back(key + "=" + value);
  return env;
}

bool StartChild(Child* c) {
  c->pid = Spawn(c->argv, c->env);
  c->started = std::chrono::steady_clock::now();
  if (c->pid < 0) {
    Log("error", "cannot fork a replica", {{"address", c->address}});
    return false;
  }
  Log("info", "replica started",
      {{"pid", std::to_string(c->pid)},
       {"address", c->address},
       {"model", std::to_string(c->model)},
       {"gpu", c->gpu.empty() ? "-" : c->gpu}});
  return true;
}

void ReapAndRestart(std::vector<Child>* children) {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& c : *children) {
      if (c.pid != pid) continue;
      Log("warn", "replica exited; restarting",
          {{"pid", std::to_string(pid)},
           {"address", c.address},
           {"status",
            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))}});
      // Crash loops are slowed to one start per second per replica.
      const auto since = std::chrono::steady_clock::now() - c.started;
      if (since < std::chrono::seconds(1))
        std::this_thread::sleep_for(std::chrono::seconds(1) - since);
      StartChild(&c);
    }
  }
}

void StopChildren(std::vector<Child>* children, int grace_ms) {
  for (auto& c : *children) {
    if (c.pid > 0) kill(c.pid, SIGTERM);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms + 5000);
  for (auto& c : *children) {
    while (c.pid > 0) {
      int status;
      if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.pid = -1;
      } else if (std::chrono::steady_clock::now() > end) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &status, 0);
        c.pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

}  // namespace petal::cli
