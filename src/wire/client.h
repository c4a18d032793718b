// EmbedClient: a small C++ client for the Petal server (petal.v1.Embedder and grpc.health.v1),
// used by tests, `petal client`, and gateways (requests and responses are built and decoded by
// wire/messages.h, included here). Thread-safety: an EmbedClient may be used
// from many threads at once (gRPC channels and stubs are thread-safe); a PendingCall belongs to
// the thread that waits on it, but Cancel() may be called from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "petal.grpc.pb.h"
#include "wire/messages.h"
#include "wire/replica_transport.h"

namespace petal::wire {

// Converts a gRPC status to Petal's (the codes are the same numbers).
Status FromGrpc(const grpc::Status& s);

// An Embed call in progress (gRPC callback API underneath).
class PendingCall {
 public:
  // Cancels the call if still running and waits for it (gRPC must be done with it).
  ~PendingCall();
  // Cancels the call (the server drops its work if it has not run yet).
  void Cancel() { ctx_.TryCancel(); }
  // Blocks until the call finishes.
  StatusOr<v1::EmbedResponse> Wait();

 private:
  friend class EmbedClient;
  grpc::ClientContext ctx_;
  v1::EmbedRequest request_;
  v1::EmbedResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

class ReplyPoller;

class EmbedClient final : public ReplicaTransport {
 public:
  // Connects lazily to "host:port" or "unix:/path" without TLS. With a `poller`, EmbedAsync's
  // answers are picked up by its polling thread (reply_poller.h) instead of gRPC's callback
  // threads; the poller must outlive every call made through this client.
  explicit EmbedClient(const std::string& address, ReplyPoller* poller = nullptr);

  // Synchronous Embed; timeout 0 means no deadline.
  StatusOr<v1::EmbedResponse> Embed(
      const v1::EmbedRequest& request,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Synchronous Embed that busy-polls its completion queue instead of sleeping until the reply:
  // burns the calling core, saves the thread wake-up. For latency-critical callers and
  // benchmarks that must not count their own wake-up in the server's latency.
  StatusOr<v1::EmbedResponse> EmbedBusyPoll(
      const v1::EmbedRequest& request,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Asynchronous Embed: returns at once; Wait() on the result.
  std::unique_ptr<PendingCall> StartEmbed(
      v1::EmbedRequest request, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Asynchronous Embed with a completion callback (for event-driven gateways). `done` runs once on
  // a gRPC thread and must not block. A non-empty `traceparent` (W3C trace context) is sent as
  // the call's `traceparent` metadata.
  void EmbedAsync(std::shared_ptr<const v1::EmbedRequest> request,
                  std::chrono::milliseconds timeout, EmbedDone done,
                  const std::string& traceparent = {}) override;
  StatusOr<v1::ModelInfoResponse> ModelInfo() override;
  StatusOr<v1::StatsResponse> Stats() override;
  // grpc.health.v1 Check for `service` ("" = the Embedder service, which a server marks SERVING
  // once its model is loaded): true iff SERVING.
  StatusOr<bool> Serving(const std::string& service = "") override;
  // Waits until the server answers SERVING or `timeout` passes.
  bool WaitUntilServing(std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Embedder::Stub> stub_;
  ReplyPoller* poller_ = nullptr;
};

}  // namespace petal::wire
