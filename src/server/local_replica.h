// LocalReplica: an inference server in the gateway's own process (`petal serve --replica-mode
// local`). It is the gRPC server's core without gRPC: the same request validation
// (JobFromRequest), the same engine loop (scheduler and completion threads, engine_loop.h) and
// the same answers (FillResponse, server_info.h), reached through wire::ReplicaTransport, so the
// gateway hands a chunk to the loop with no serialisation, HTTP/2 framing or gRPC thread hop;
// the answer's callback runs on the loop's completion thread.
//
// Faults: a LocalReplica shares its process with the gateway. An engine error fails the batch's
// requests (INTERNAL), as in a server process; but a fault that ends the process (a crash, or a
// CUDA error the driver makes fatal) ends the gateway too, and a sticky CUDA error leaves this
// replica failing until the process restarts. `--replica-mode process` (a server per replica,
// restarted by the supervisor) keeps that isolation.
//
// Thread-safety: every method may be called from any thread at once; see ReplicaTransport.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "wire/replica_transport.h"

namespace petal::server {

class LocalReplica final : public wire::ReplicaTransport {
 public:
  // Serves `engine` through a new engine loop with `options`; SERVING at once.
  LocalReplica(std::unique_ptr<Engine> engine, EngineLoopOptions options);
  ~LocalReplica() override;  // Shutdown()

  void EmbedAsync(v1::EmbedRequest request, std::chrono::milliseconds timeout, EmbedDone done,
                  const std::string& traceparent = {}) override;
  StatusOr<v1::ModelInfoResponse> ModelInfo() override;
  StatusOr<v1::StatsResponse> Stats() override;
  StatusOr<bool> Serving(const std::string& service = "") override;

  // Stops admitting (new calls get UNAVAILABLE, health turns NOT_SERVING), finishes the admitted
  // work and stops the loop's threads. Idempotent.
  void Shutdown();

 private:
  ServerMetrics metrics_;
  const Clock::time_point started_ = Clock::now();
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineLoop> loop_;
  std::atomic<bool> serving_{true};
};

}  // namespace petal::server
