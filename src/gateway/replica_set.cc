#include "gateway/replica_set.h"

#include <limits>

namespace petal::gateway {

ReplicaSet::ReplicaSet(const std::vector<std::string>& addresses,
                       std::chrono::milliseconds health_interval,
                       std::chrono::milliseconds call_timeout)
    : health_interval_(health_interval), call_timeout_(call_timeout) {
  for (const auto& a : addresses) {
    auto r = std::make_unique<Replica>();
    r->address = a;
    r->client = std::make_shared<wire::EmbedClient>(a);
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
      auto fresh = std::make_shared<wire::EmbedClient>(r->address);
      auto f = fresh->Serving();
      if (f.ok() && *f) {
        std::lock_guard<std::mutex> client_lock(r->mu);
        r->client = std::move(fresh);
        up = true;
      }
    }
    r->up = up;
    lock.lock();
  }
}

ReplicaSet::Replica* ReplicaSet::Pick(const Replica* avoid) const {
  Replica* best = nullptr;
  int64_t best_load = std::numeric_limits<int64_t>::max();
  // Ties (e.g. all idle) rotate, so that idle replicas share short requests evenly.
  const size_t n = replicas_.size();
  const size_t first = next_.fetch_add(1, std::memory_order_relaxed);
  for (size_t k = 0; k < n; ++k) {
    const auto& r = replicas_[(first + k) % n];
    if (r.get() == avoid || !r->up.load()) continue;
    const int64_t load = r->outstanding.load();
    if (load < best_load) {
      best = r.get();
      best_load = load;
    }
  }
  return best;
}

void ReplicaSet::Embed(v1::EmbedRequest request, int64_t tokens, Done done,
                       std::string traceparent) {
  Replica* r = Pick(nullptr);
  if (r == nullptr) {
    done(Unavailable("no inference server is serving"));
    return;
  }
  Send(r, std::make_shared<v1::EmbedRequest>(std::move(request)), tokens, false, std::move(done),
       std::move(traceparent));
}

void ReplicaSet::Send(Replica* r, std::shared_ptr<v1::EmbedRequest> request, int64_t tokens,
                      bool retried, Done done, std::string traceparent) {
  r->outstanding += tokens;
  r->calls++;
  // The request is kept (not moved) so that it can be retried elsewhere.
  // The client is kept alive by the callback: the health thread may swap in a new one.
  auto client = r->Client();
  client->EmbedAsync(
      *request, call_timeout_,
      [this, r, client, request, tokens, retried, traceparent,
       done = std::move(done)](StatusOr<v1::EmbedResponse> result) mutable {
        r->outstanding -= tokens;
        if (result.ok()) return done(std::move(result));
        r->failures++;
        // The gateway never cancels its calls, so CANCELLED means the server dropped
        // the call
        // (it is shutting down): like UNAVAILABLE, the replica is down and the chunk
        // retried.
        const StatusCode code = result.status().code();
        if (code == StatusCode::kUnavailable || code == StatusCode::kCancelled) {
          r->up = false;
          if (!retried) {
            if (Replica* other = Pick(r)) {
              return Send(other, std::move(request), tokens, true, std::move(done),
                          std::move(traceparent));
            }
          }
        }
        done(std::move(result));
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
    out.push_back(
        {r->address, r->up.load(), r->outstanding.load(), r->calls.load(), r->failures.load()});
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
  return Unavailable("no inference server is serving");
}

}  // namespace petal::gateway
