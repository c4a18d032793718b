// The process-wide registry of in-process replicas (replica_transport.h), under one mutex.
#include "wire/replica_transport.h"

#include <map>
#include <mutex>

namespace petal::wire {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::shared_ptr<ReplicaTransport>, std::less<>>& Registry() {
  static auto* registry = new std::map<std::string, std::shared_ptr<ReplicaTransport>, std::less<>>;
  return *registry;
}

class Unavailable final : public ReplicaTransport {
 public:
  explicit Unavailable(std::string why) : why_(std::move(why)) {}
  void EmbedAsync(std::shared_ptr<const v1::EmbedRequest>, std::chrono::milliseconds,
                  EmbedDone done, const std::string&) override {
    done(Status(StatusCode::kUnavailable, why_));
  }
  StatusOr<v1::ModelInfoResponse> ModelInfo() override {
    return Status(StatusCode::kUnavailable, why_);
  }
  StatusOr<v1::StatsResponse> Stats() override { return Status(StatusCode::kUnavailable, why_); }
  StatusOr<bool> Serving(const std::string&) override { return false; }

 private:
  const std::string why_;
};

}  // namespace

std::shared_ptr<ReplicaTransport> UnavailableTransport(std::string why) {
  return std::make_shared<Unavailable>(std::move(why));
}

void RegisterLocalReplica(const std::string& name, std::shared_ptr<ReplicaTransport> replica) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = std::move(replica);
}

void UnregisterLocalReplica(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().erase(name);
}

std::shared_ptr<ReplicaTransport> FindLocalReplica(std::string_view address) {
  if (!IsLocalAddress(address)) return nullptr;
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& r = Registry();
  auto it = r.find(address.substr(kLocalAddressPrefix.size()));
  return it == r.end() ? nullptr : it->second;
}

}  // namespace petal::wire
