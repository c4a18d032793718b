#include "gateway/replica_set.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

namespace petal::gateway {

int64_t DefaultMaxHeldTokens() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
  // A container's limit (cgroup v2, then v1) is what the kernel enforces.
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(path);
    int64_t limit = 0;
    if (f >> limit && limit > 0) bytes = std::min(bytes, limit);
  }
  return std::clamp<int64_t>(bytes / 8 / kHeldBytesPerToken, int64_t{1} << 22, int64_t{1} << 28);
}

std::shared_ptr<wire::ReplicaTransport> ReplicaSet::MakeTransport(const std::string& address) {
  if (!wire::IsLocalAddress(address))
    return std::make_shared<wire::EmbedClient>(address, poller_.get());
  if (auto local = wire::FindLocalReplica(address)) return local;
  return wire::UnavailableTransport("gateway: no local replica is registered as " + address);
}

ReplicaSet::ReplicaSet(const std::vector<std::string>& addresses,
                       std::chrono::milliseconds health_interval,
                       std::chrono::milliseconds call_timeout, FlowOptions flow,
                       std::chrono::microseconds reply_poll)
    : health_interval_(health_interval), call_timeout_(call_timeout), flow_(flow) {
  if (reply_poll.count() >= 0) poller_ = std::make_unique<wire::ReplyPoller>(reply_poll);
  if (flow_.max_held_tokens <= 0) flow_.max_held_tokens = DefaultMaxHeldTokens();
  flow_.replica_window_tokens = std::max<int64_t>(1, flow_.replica_window_tokens);
  flow_.replica_window_calls = std::max(1, flow_.replica_window_calls);
  for (const auto& a : addresses) {
    auto r = std::make_unique<Replica>();
    r->address = a;
    r->client = MakeTransport(a);
    replicas_.push_back(std::move(r));
  }
  // One synchronous round so that a gateway started after its servers is ready at once.
  for (auto& r : replicas_) {
    auto s = r->Client()->Serving();
    r->up = s.ok() && *s;
  }
  for (auto& r : replicas_) health_threads_.emplace_back([this, p = r.get()] { HealthLoop(p); });
}

ReplicaSet::~ReplicaSet() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : health_threads_) t.join();
}

void ReplicaSet::HealthLoop(Replica* r) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, health_interval_, [this] { return stopping_; })) {
    lock.unlock();
    auto s = r->Client()->Serving();
    bool up = s.ok() && *s;
    if (!up) {
      auto fresh = MakeTransport(r->address);
      auto f = fresh->Serving();
      if (f.ok() && *f) {
        std::lock_guard<std::mutex> client_lock(r->mu);
        r->client = std::move(fresh);
        up = true;
      }
    }
    r->up = up;
    // Queued chunks may go to a replica that came back, and expired ones are answered.
    Dispatch();
    lock.lock();
  }
}

ReplicaSet::Replica* ReplicaSet::PickLocked(int64_t tokens) const {
  Replica* best = nullptr;
  int64_t best_load = std::numeric_limits<int64_t>::max();
  // Ties (e.g. all idle) rotate, so that idle replicas share short requests evenly.
  const size_t n = replicas_.size();
  const size_t first = next_.fetch_add(1, std::memory_order_relaxed);
  for (size_t k = 0; k < n; ++k) {
    const auto& r = replicas_[(first + k) % n];
    if (!r->up.load() || r->full) continue;
    const int64_t load = r->outstanding.load();
    // An idle replica always takes a chunk, so one larger than the window still runs.
    const bool room = r->inflight_calls == 0 || (load + tokens <= flow_.replica_window_tokens &&
                                                 r->inflight_calls < flow_.replica_window_calls);
    if (room && load < best_load) {
      best = r.get();
      best_load = load;
    }
  }
  return best;
}

Status ReplicaSet::Reserve(int64_t tokens) {
  std::lock_guard<std::mutex> lock(flow_mu_);
  if (tokens > flow_.max_held_tokens) {
    return OutOfRange("gateway: the request has " + std::to_string(tokens) +
                      " tokens, more than the gateway holds at once (" +
                      std::to_string(flow_.max_held_tokens) + "); split it");
  }
  if (held_tokens_ + tokens > flow_.max_held_tokens) {
    return ResourceExhausted("gateway: queue is full (" + std::to_string(held_tokens_) +
                             " tokens held, bound " + std::to_string(flow_.max_held_tokens) +
                             "); retry later");
  }
  if (held_tokens_ == 0) {  // idle until now: the answer rate is measured from here
    rate_tokens_ = 0;
    rate_since_ = Clock::now();
  }
  held_tokens_ += tokens;
  return Status::Ok();
}

int64_t ReplicaSet::held_tokens() const {
  std::lock_guard<std::mutex> lock(flow_mu_);
  return held_tokens_;
}

int64_t ReplicaSet::queued_tokens() const {
  std::lock_guard<std::mutex> lock(flow_mu_);
  return queued_tokens_;
}

void ReplicaSet::Embed(std::shared_ptr<v1::EmbedRequest> request, int64_t tokens, Done done,
                       std::string traceparent) {
  Chunk c;
  c.traceparent = std::move(traceparent);
  c.request = std::move(request);
  c.tokens = tokens;
  c.deadline = Clock::now() + call_timeout_;
  c.done = std::move(done);
  if (!AnyUp()) return Finish(std::move(c), Unavailable("gateway: no inference server is serving"));
  {
    std::lock_guard<std::mutex> lock(flow_mu_);
    queued_tokens_ += c.tokens;
    queue_.push_back(std::move(c));
  }
  Dispatch();
}

int RetryAfterSeconds(int64_t held, double tokens_per_s) {
  if (!(tokens_per_s > 0) || held <= 0) return 1;
  const double s = std::ceil(static_cast<double>(held) / tokens_per_s);
  return static_cast<int>(std::clamp(s, 1.0, 60.0));
}

int ReplicaSet::RetryAfterSeconds() const {
  std::lock_guard<std::mutex> lock(flow_mu_);
  return gateway::RetryAfterSeconds(held_tokens_, rate_);
}

double ReplicaSet::answer_rate() const {
  std::lock_guard<std::mutex> lock(flow_mu_);
  return rate_;
}

void ReplicaSet::Finish(Chunk c, StatusOr<v1::EmbedResponse> result) {
  {
    std::lock_guard<std::mutex> lock(flow_mu_);
    held_tokens_ -= c.tokens;
    if (result.ok()) {
      rate_tokens_ += c.tokens;
      const auto now = Clock::now();
      const double dt = std::chrono::duration<double>(now - rate_since_).count();
      if (dt >= 0.25) {
        const double r = static_cast<double>(rate_tokens_) / dt;
        rate_ = rate_ > 0 ? 0.5 * rate_ + 0.5 * r : r;
        rate_tokens_ = 0;
        rate_since_ = now;
      }
    }
  }
  // The request goes back for reuse once its last holder (this chunk, or a transport still
  // tearing its call down) lets go of it (wire/recycled.h).
  c.request.reset();
  c.done(std::move(result));
}

void ReplicaSet::Dispatch() {
  // A chunk with less than this left would most likely time out on the server: it is answered
  // from the queue instead, which tells the client sooner.
  const auto margin = std::min<Clock::duration>(call_timeout_ / 4, std::chrono::seconds(1));
  for (;;) {
    Chunk c;
    Replica* r = nullptr;
    Status failed;
    {
      std::lock_guard<std::mutex> lock(flow_mu_);
      if (queue_.empty()) return;
      Chunk& head = queue_.front();
      if (!AnyUp()) {
        failed = Unavailable("gateway: no inference server is serving");
      } else if (head.deadline <= Clock::now() + margin) {
        failed = ResourceExhausted(
            "gateway: the request's deadline passed while it waited for capacity in the gateway; "
            "retry later");
      } else if ((r = PickLocked(head.tokens)) != nullptr) {
        r->outstanding += head.tokens;
        r->inflight_calls++;
        head.sent_completions = r->completions;
      } else {
        return;  // the head waits for room: nothing behind it overtakes it
      }
      queued_tokens_ -= head.tokens;
      c = std::move(head);
      queue_.pop_front();
    }
    if (r == nullptr) {
      Finish(std::move(c), std::move(failed));
    } else {
      Send(r, std::move(c));
    }
  }
}

void ReplicaSet::Send(Replica* r, Chunk c) {
  r->calls++;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - Clock::now());
  const auto timeout = std::max(std::chrono::milliseconds(1), std::min(left, call_timeout_));
  // The request is shared (not moved) so that it can be retried elsewhere.
  // The client is kept alive by the callback: the health thread may swap in a new one.
  auto client = r->Client();
  auto request = c.request;
  const std::string traceparent = c.traceparent;
  client->EmbedAsync(
      std::move(request), timeout,
      [this, r, client, c = std::move(c)](StatusOr<v1::EmbedResponse> result) mutable {
        const StatusCode code = result.ok() ? StatusCode::kOk : result.status().code();
        bool requeue = false;
        {
          std::lock_guard<std::mutex> lock(flow_mu_);
          r->outstanding -= c.tokens;
          r->inflight_calls--;
          r->full = false;
          // Whether another of our calls on this replica completed after this one was sent: its
          // answer may have come back before this refusal, though it still filled the queue
          // when the server refused this call.
          const bool others_completed = r->completions != c.sent_completions;
          r->completions++;
          if (code == StatusCode::kResourceExhausted &&
              (r->inflight_calls > 0 || others_completed)) {
            // The server's queue is (or was) full with our own work too: one of our calls on it
            // will complete (or did) and free room, so the chunk waits at the head of the queue;
            // with none left in flight it is sent again at once.
            r->full = r->inflight_calls > 0;
            requeue = true;
          } else if ((code == StatusCode::kUnavailable || code == StatusCode::kCancelled) &&
                     !c.retried) {
            // The gateway never cancels its calls, so CANCELLED means the server dropped the call
            // (it is shutting down): like UNAVAILABLE, the replica is down and the chunk is tried
            // once more elsewhere.
            r->up = false;
            requeue = true;
            c.retried = true;
          } else if (code == StatusCode::kUnavailable || code == StatusCode::kCancelled) {
            r->up = false;
          }
          if (requeue) {
            queued_tokens_ += c.tokens;
            queue_.push_front(std::move(c));
          }
        }
        if (code != StatusCode::kOk) r->failures++;
        if (!requeue) {
          // Room freed: send what waits before answering this chunk.
          Dispatch();
          return Finish(std::move(c), std::move(result));
        }
        Dispatch();
      },
      traceparent);
}

bool ReplicaSet::AnyUp() const {
  for (const auto& r : replicas_) {
    if (r->up.load()) return true;
  }
  return false;
}

std::vector<ReplicaState> ReplicaSet::Snapshot() const {
  std::vector<ReplicaState> out;
  for (const auto& r : replicas_) {
    int inflight = 0;
    {
      std::lock_guard<std::mutex> lock(flow_mu_);
      inflight = r->inflight_calls;
    }
    out.push_back({r->address, r->up.load(), r->outstanding.load(), inflight, r->calls.load(),
                   r->failures.load()});
  }
  return out;
}

std::vector<std::pair<std::string, StatusOr<v1::StatsResponse>>> ReplicaSet::Stats() {
  std::vector<std::pair<std::string, StatusOr<v1::StatsResponse>>> out;
  for (auto& r : replicas_) {
    if (!r->up.load()) {
      out.emplace_back(r->address, Unavailable("replica is down"));
    } else {
      out.emplace_back(r->address, r->Client()->Stats());
    }
  }
  return out;
}

StatusOr<v1::ModelInfoResponse> ReplicaSet::ModelInfo() {
  for (auto& r : replicas_) {
    if (r->up.load()) return r->Client()->ModelInfo();
  }
  return Unavailable("gateway: no inference server is serving");
}

}  // namespace petal::gateway
