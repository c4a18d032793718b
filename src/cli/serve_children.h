// The child processes of `petal serve` (one `petal server` per replica, re-executing this
// binary): spawning with a prepared argv and environment, restarting those that exit, and
// stopping them all with a grace period. Thread-safety: call from `petal serve`'s controlling
// thread only (Spawn forks; nothing here may run concurrently with it).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace petal::cli {

struct Child {
  pid_t pid = -1;
  std::string address;  // what the child listens on: unix:/tmp/petal-serve-*/replica-N.sock or
                        // 127.0.0.1:PORT
  std::vector<std::string> argv;
  std::vector<std::string> env;  // empty: inherit ours
  std::string gpu;               // its CUDA_VISIBLE_DEVICES, for the logs
  size_t model = 0;              // which --model it serves (its index)
  std::chrono::steady_clock::time_point started;
};

// A free loopback port: bound, read and released. Another process could take it before the
// child binds it; the child then fails to start and is reported, which is acceptable for a
// one-command local deployment. 0 if none could be bound.
int FreePort();

// Our environment with `key` set to `value`.
std::vector<std::string> EnvWith(const std::string& key, const std::string& value);

// Starts the child (its argv and env); false (logged) if it cannot fork.
bool StartChild(Child* c);

// Restarts children that exited (not during shutdown).
void ReapAndRestart(std::vector<Child>* children);

// SIGTERM to every child, then waits up to grace_ms + 5 s for each before SIGKILL.
void StopChildren(std::vector<Child>* children, int grace_ms);

}  // namespace petal::cli
