// ReplyPoller: asynchronous Embed calls whose answers are picked up by one thread that polls a
// completion queue without sleeping while calls are in flight (and for `spin` after the last one),
// and blocks in the queue otherwise. gRPC's callback API instead wakes a sleeping thread for each
// answer, which on a virtual machine costs tens of microseconds per hop (docs/performance.md,
// "serving path"). The price is one core busy while the gateway has work out.
// Thread-safety: Embed() may be called from any thread; `done` runs on the poller's thread, one
// call at a time, and must not block. The destructor cancels calls still in flight, waits for
// their callbacks and joins the thread; it must not run on the poller's thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "common/status.h"
#include "petal.grpc.pb.h"
#include "wire/replica_transport.h"

namespace petal::wire {

class ReplyPoller {
 public:
  // spin: how long the thread keeps polling after its last answer before it sleeps in the queue.
  explicit ReplyPoller(std::chrono::microseconds spin);
  ~ReplyPoller();
  ReplyPoller(const ReplyPoller&) = delete;
  ReplyPoller& operator=(const ReplyPoller&) = delete;

  // Starts `request` on `stub`; `done` gets the answer or the call's status. timeout 0: none.
  // A non-empty `traceparent` is sent as the call's metadata.
  void Embed(v1::Embedder::Stub* stub, std::shared_ptr<const v1::EmbedRequest> request,
             std::chrono::milliseconds timeout, ReplicaTransport::EmbedDone done,
             const std::string& traceparent);

  // Calls started and not yet answered.
  int inflight() const { return inflight_.load(std::memory_order_relaxed); }

 private:
  struct Call;
  void Main();

  const std::chrono::microseconds spin_;
  grpc::CompletionQueue cq_;
  std::atomic<int> inflight_{0};
  std::mutex mu_;  // guards calls_
  std::unordered_set<Call*> calls_;
  std::thread thread_;
};

}  // namespace petal::wire
