// ReplicaTransport: how a gateway talks to one inference server, whatever carries the calls.
// Two kinds implement it: EmbedClient (gRPC, wire/client.h) for servers in other processes or on
// other hosts, and server::LocalReplica (server/local_replica.h) for an engine in the gateway's own
// process, which skips serialisation, HTTP/2 and gRPC's thread hand-offs. The gateway (ReplicaSet)
// sees only this interface, so balancing, chunking, flow control and failover treat both alike.
//
// Local replicas are found by address: "local:<name>" names one registered here by whoever built
// it (`petal serve --replica-mode local`). The registry holds shared pointers; unregistering does
// not end calls in flight.
//
// Thread-safety: implementations must allow every method from any thread at once. The registry
// functions are thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_function.h"
#include "petal.pb.h"

namespace petal::wire {

class ReplicaTransport {
 public:
  // Move-only, its capture inline when small (common/unique_function.h): no allocation per call.
  using EmbedDone = UniqueFunction<void(StatusOr<v1::EmbedResponse>)>;
  virtual ~ReplicaTransport() = default;

  // Starts one Embed call; `done` runs exactly once, possibly before this returns (a refusal),
  // and must not block. The request is shared, not copied: the caller keeps it for a retry on
  // another replica, and a local replica reads it in place. `timeout` 0: no deadline. A non-empty
  // `traceparent` (W3C trace context) makes the server's span a child of the caller's.
  virtual void EmbedAsync(std::shared_ptr<const v1::EmbedRequest> request,
                          std::chrono::milliseconds timeout, EmbedDone done,
                          const std::string& traceparent = {}) = 0;
  virtual StatusOr<v1::ModelInfoResponse> ModelInfo() = 0;
  virtual StatusOr<v1::StatsResponse> Stats() = 0;
  // grpc.health.v1 semantics: true iff `service` is SERVING; "" asks whether the server can embed
  // (its model is loaded).
  virtual StatusOr<bool> Serving(const std::string& service = "") = 0;
};

inline constexpr std::string_view kLocalAddressPrefix = "local:";
inline bool IsLocalAddress(std::string_view address) {
  return address.substr(0, kLocalAddressPrefix.size()) == kLocalAddressPrefix;
}

// Registers `replica` as "local:<name>" (replacing one of the same name).
void RegisterLocalReplica(const std::string& name, std::shared_ptr<ReplicaTransport> replica);
void UnregisterLocalReplica(const std::string& name);
// The replica registered for a "local:<name>" address; null if none is (or it is not local).
std::shared_ptr<ReplicaTransport> FindLocalReplica(std::string_view address);
// A transport that answers every call UNAVAILABLE with `why` and is never SERVING (stands in for a
// local replica that is not registered, yet or any more).
std::shared_ptr<ReplicaTransport> UnavailableTransport(std::string why);

}  // namespace petal::wire
