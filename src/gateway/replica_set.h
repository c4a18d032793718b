// ReplicaSet: the inference servers behind one gateway, with health and load. Each chunk goes to
// the healthy replica with the fewest outstanding tokens (latency is proportional to tokens, not
// sequences, so tokens are the load measure). A replica that fails a call with UNAVAILABLE (or
// CANCELLED, which a server that is shutting down answers) is marked down at once and the chunk
// is retried once on another replica; a background thread per replica polls the gRPC health
// service and marks it up again when it answers SERVING. A gRPC channel that failed to connect
// backs off (seconds, growing to minutes) before trying again, so a down replica is probed on a
// fresh channel too, which is swapped in once it works.
//
// Thread-safety: all public methods may be called from any thread. Completion callbacks run on
// gRPC threads and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "wire/client.h"

namespace petal::gateway {

struct ReplicaState {
  std::string address;
  bool up = false;
  int64_t outstanding_tokens = 0;
  uint64_t calls = 0;
  uint64_t failures = 0;
};

class ReplicaSet {
 public:
  using Done = std::function<void(StatusOr<v1::EmbedResponse>)>;

  // Checks every replica's health once before returning; then every `health_interval`.
  ReplicaSet(const std::vector<std::string>& addresses, std::chrono::milliseconds health_interval,
             std::chrono::milliseconds call_timeout);
  // Stops the health threads (calls still in flight complete normally).
  ~ReplicaSet();

  // Sends `request` (`tokens` tokens) to the least-loaded healthy replica; `done` runs once.
  // `traceparent` (may be empty) goes with the call, retries included, as gRPC metadata.
  void Embed(v1::EmbedRequest request, int64_t tokens, Done done, std::string traceparent = {});
  bool AnyUp() const;
  std::vector<ReplicaState> Snapshot() const;
  // Each replica's Stats (an error for replicas that do not answer).
  std::vector<std::pair<std::string, StatusOr<v1::StatsResponse>>> Stats();
  // The first healthy replica's ModelInfo.
  StatusOr<v1::ModelInfoResponse> ModelInfo();
  size_t size() const { return replicas_.size(); }

 private:
  struct Replica {
    std::string address;
    // Replaced by the health thread when a fresh channel reaches a replica that the old one
    // cannot (see HealthLoop); guarded by mu, used through copies.
    std::shared_ptr<wire::EmbedClient> client;
    mutable std::mutex mu;
    std::shared_ptr<wire::EmbedClient> Client() const {
      std::lock_guard<std::mutex> lock(mu);
      return client;
    }
    std::atomic<bool> up{false};
    std::atomic<int64_t> outstanding{0};
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> failures{0};
  };
  // Least outstanding tokens among up replicas other than `avoid`; null if none.
  Replica* Pick(const Replica* avoid) const;
  void Send(Replica* r, std::shared_ptr<v1::EmbedRequest> request, int64_t tokens, bool retried,
            Done done, std::string traceparent);
  void HealthLoop(Replica* r);

  std::vector<std::unique_ptr<Replica>> replicas_;
  mutable std::atomic<size_t> next_{0};  // where Pick starts looking, for tie-breaking
  std::chrono::milliseconds health_interval_;
  std::chrono::milliseconds call_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::thread> health_threads_;
};

}  // namespace petal::gateway
