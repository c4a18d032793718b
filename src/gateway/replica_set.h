// ReplicaSet: the inference servers behind one gateway, with health and load. Each chunk goes to
// the healthy replica with the fewest outstanding tokens (latency is proportional to tokens, not
// sequences, so tokens are the load measure). A replica that fails a call with UNAVAILABLE (or
// CANCELLED, which a server that is shutting down answers) is marked down at once and the chunk
// is retried once on another replica; a background thread per replica polls the gRPC health
// service and marks it up again when it answers SERVING. A gRPC channel that failed to connect
// backs off (seconds, growing to minutes) before trying again, so a down replica is probed on a
// fresh channel too, which is swapped in once it works.
//
// Flow control (docs/architecture.md, "Flow control"): a request first reserves its tokens from
// the gateway's own bound (Reserve); its chunks then wait in one FIFO queue and are sent, head
// first, as soon as a healthy replica has room in its window (tokens and calls in flight from
// this gateway). A server that still answers RESOURCE_EXHAUSTED (its queue is shared with other
// clients) gets the chunk back at the head of the queue, and is skipped until one of our calls
// on it completes. A queued chunk whose request deadline passes (or is less than a quarter of the
// call timeout, at most 1 s, away) is answered RESOURCE_EXHAUSTED (HTTP 429 with Retry-After).
// Because the queue is served strictly from its head, accepted work keeps its order and nothing
// starves.
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

#include "common/ring_queue.h"
#include "common/status.h"
#include "wire/client.h"
#include "wire/replica_transport.h"
#include "wire/reply_poller.h"

namespace petal::gateway {

struct FlowOptions {
  // Tokens in flight (sent, not answered) per replica; keep at most the servers'
  // --max-queue-tokens. A chunk larger than the window is sent alone to an idle replica.
  int64_t replica_window_tokens = 1 << 20;
  // Calls in flight per replica; keep at most the servers' --max-queue-requests.
  int replica_window_calls = 1024;
  // Tokens held by the gateway (queued + in flight); past it requests get 429. 0: sized from
  // memory, see DefaultMaxHeldTokens.
  int64_t max_held_tokens = 0;
};

// Bytes the gateway holds per accepted token: the request text (~4), the tokenized ids (4) and the
// chunk's request message (4), plus the answers' share, rounded up.
inline constexpr int64_t kHeldBytesPerToken = 16;
// The default gateway bound: an eighth of the memory this process may use (the cgroup limit, else
// physical memory) divided by kHeldBytesPerToken, within [2^22, 2^28] tokens.
int64_t DefaultMaxHeldTokens();
// The Retry-After of a 429: the seconds the replicas need, at `tokens_per_s` (their recent
// answer rate), to work off the `held` tokens ahead of a new request; within [1, 60] (1 when no
// rate is known yet).
int RetryAfterSeconds(int64_t held, double tokens_per_s);

struct ReplicaState {
  std::string address;
  bool up = false;
  int64_t outstanding_tokens = 0;
  int inflight_calls = 0;
  uint64_t calls = 0;
  uint64_t failures = 0;
};

class ReplicaSet {
 public:
  using Done = wire::ReplicaTransport::EmbedDone;  // move-only (common/unique_function.h)

  // Checks every replica's health once before returning; then every `health_interval`.
  // `call_timeout` is also each request's deadline, counted from when its chunks are queued.
  // reply_poll >= 0: answers are collected by one polling thread (wire/reply_poller.h) that
  // spins while calls are in flight and for reply_poll after the last; < 0: gRPC's callbacks.
  ReplicaSet(const std::vector<std::string>& addresses, std::chrono::milliseconds health_interval,
             std::chrono::milliseconds call_timeout, FlowOptions flow = {},
             std::chrono::microseconds reply_poll = std::chrono::microseconds(-1));
  // Stops the health threads. Destroy only once no call is in flight (the gateway waits).
  ~ReplicaSet();

  // Reserves `tokens` of the gateway's bound for one request's chunks: RESOURCE_EXHAUSTED past
  // the bound, OUT_OF_RANGE if `tokens` alone exceeds it. Each chunk given to Embed releases
  // its own tokens when its `done` runs.
  Status Reserve(int64_t tokens);
  // Queues `request` (`tokens` reserved tokens) for the least-loaded healthy replica with room;
  // `done` runs once (UNAVAILABLE at once if no replica is up). `traceparent` (may be empty) goes
  // with the call, retries included, as gRPC metadata. The set owns `request` from here (it must
  // not be changed any more) and lets go of it once the chunk is answered (a request from
  // wire::TakeEmbedRequest then goes back for reuse).
  void Embed(std::shared_ptr<v1::EmbedRequest> request, int64_t tokens, Done done,
             std::string traceparent = {});
  int64_t held_tokens() const;
  int64_t queued_tokens() const;
  // RetryAfterSeconds for the tokens held now at the recent answer rate.
  int RetryAfterSeconds() const;
  // Tokens answered per second, smoothed over recent answers (0 before the first).
  double answer_rate() const;
  int64_t max_held_tokens() const { return flow_.max_held_tokens; }
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
    std::shared_ptr<wire::ReplicaTransport> client;
    mutable std::mutex mu;
    std::shared_ptr<wire::ReplicaTransport> Client() const {
      std::lock_guard<std::mutex> lock(mu);
      return client;
    }
    std::atomic<bool> up{false};
    std::atomic<int64_t> outstanding{0};
    std::atomic<uint64_t> calls{0};
    std::atomic<uint64_t> failures{0};
    // Flow control, guarded by ReplicaSet::flow_mu_.
    int inflight_calls = 0;
    bool full = false;  // answered RESOURCE_EXHAUSTED; skipped until one of our calls completes
    uint64_t completions = 0;  // our calls on it that have completed, ever
  };
  using Clock = std::chrono::steady_clock;
  struct Chunk {
    std::shared_ptr<v1::EmbedRequest> request;
    int64_t tokens = 0;
    Clock::time_point deadline;
    bool retried = false;
    uint64_t sent_completions = 0;  // the replica's `completions` when this chunk was sent
    Done done;
    std::string traceparent;
  };
  // A gRPC client for host:port / unix: addresses, the registered in-process replica for
  // "local:<name>" (wire/replica_transport.h), or one that answers UNAVAILABLE until it is.
  std::shared_ptr<wire::ReplicaTransport> MakeTransport(const std::string& address);
  // The least-loaded up replica with room for `tokens`; null if none. Needs flow_mu_.
  Replica* PickLocked(int64_t tokens) const;
  // Sends queued chunks, head first, while replicas have room; answers expired ones. Takes one
  // chunk at a time off the queue (no list to allocate), and may be re-entered by a call that
  // completes at once.
  void Dispatch();
  void Send(Replica* r, Chunk c);
  // Releases the chunk's reservation and runs its `done`.
  void Finish(Chunk c, StatusOr<v1::EmbedResponse> result);
  void HealthLoop(Replica* r);

  // Declared before the replicas, destroyed after them: their clients hand calls to it.
  std::unique_ptr<wire::ReplyPoller> poller_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  mutable std::atomic<size_t> next_{0};  // where Pick starts looking, for tie-breaking
  std::chrono::milliseconds health_interval_;
  std::chrono::milliseconds call_timeout_;
  FlowOptions flow_;
  mutable std::mutex flow_mu_;
  RingQueue<Chunk> queue_;   // chunks waiting for room, in arrival order
  int64_t held_tokens_ = 0;  // reserved: queued or in flight
  int64_t queued_tokens_ = 0;
  // Answer-rate estimate: tokens answered since rate_since_, folded into rate_ every ~250 ms.
  int64_t rate_tokens_ = 0;
  Clock::time_point rate_since_ = Clock::now();
  double rate_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::thread> health_threads_;
};

}  // namespace petal::gateway
