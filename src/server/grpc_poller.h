// GrpcPoller: one thread that polls the server's gRPC sockets without sleeping for `spin` after
// the last activity (a request arriving, an answer leaving), so that the next request is read by
// a thread that is already awake instead of one woken from epoll (tens of microseconds on a
// virtual machine: docs/performance.md, "Serving path"). It owns a completion queue registered
// with the server on which no call is ever requested: polling it drives gRPC's I/O. Idle (past
// `spin`) it waits in the queue like gRPC's own threads. Costs a core while hot.
// Thread-safety: construct before BuildAndStart, Start after it, Shutdown after the server's
// Shutdown, all from the controlling thread; Touch from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace petal::server {

class GrpcPoller {
 public:
  GrpcPoller(grpc::ServerBuilder* builder, std::chrono::microseconds spin);
  ~GrpcPoller() { Shutdown(); }
  void Start();
  // Keeps the thread polling for `spin` from now.
  void Touch() { hot_until_ns_.store(NowNs() + spin_ns_, std::memory_order_relaxed); }
  void Shutdown();

 private:
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void Main();

  const int64_t spin_ns_;
  std::atomic<int64_t> hot_until_ns_{0};
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  bool shut_down_ = false;
};

}  // namespace petal::server
