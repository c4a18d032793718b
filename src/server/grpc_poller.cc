#include "server/grpc_poller.h"

namespace petal::server {

GrpcPoller::GrpcPoller(grpc::ServerBuilder* builder, std::chrono::microseconds spin)
    : spin_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(spin).count()),
      cq_(builder->AddCompletionQueue()) {}

void GrpcPoller::Start() {
  thread_ = std::thread([this] { Main(); });
}

void GrpcPoller::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  cq_->Shutdown();  // Main sees SHUTDOWN once the (always empty) queue is drained
  if (thread_.joinable()) {
    thread_.join();
  } else {
    void* tag;
    bool ok;
    while (cq_->Next(&tag, &ok)) {
    }
  }
}

void GrpcPoller::Main() {
  for (;;) {
    void* tag = nullptr;
    bool ok = false;
    const bool hot = NowNs() < hot_until_ns_.load(std::memory_order_relaxed);
    // A zero deadline polls (epoll_wait with no timeout) and returns; idle, wait like gRPC's own
    // threads do, waking for I/O or after 10 ms to look at hot_until_ns_ again.
    const auto r =
        hot ? cq_->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC))
            : cq_->AsyncNext(&tag, &ok,
                             std::chrono::system_clock::now() + std::chrono::milliseconds(10));
    if (r == grpc::CompletionQueue::SHUTDOWN) return;
  }
}

}  // namespace petal::server
