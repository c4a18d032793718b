// LocalReplica: an inference server in the gateway's own process (`petal serve
// --replica-transport local`). It is the gRPC server's core without gRPC: the same request
// validation (JobFromRequest), the same engine loop (scheduler and completion threads,
// engine_loop.h) and the same answers (FillResponse, server_info.h), reached through
// wire::ReplicaTransport, so the gateway hands a chunk to the loop with no serialisation, HTTP/2
// framing or gRPC thread hop; the answer's callback runs on the loop's completion thread.
//
// Faults. An engine error (a Step or a result that fails with INTERNAL, UNKNOWN or DATA_LOSS: a
// CUDA error, say) is taken as a fault of the whole engine, not of one batch: the replica stops
// serving at once (health NOT_SERVING), the failed batch's requests and every request admitted
// after it answer UNAVAILABLE (so the gateway retries each chunk once on another replica, or holds
// it until this one is back), and a restart thread drains the old loop, destroys the old engine
// and builds a new one with the `rebuild` function (for CUDA, after resetting the device when the
// replica owns it: cmd_server.cc), retrying once a second until it succeeds or Shutdown(). The
// gateway's health check then takes the replica back. Without `rebuild` the replica stays down.
// What this cannot contain: a fault that ends the process (a crash, an abort in a library) ends
// the gateway too; `--replica-transport unix` (a server process per replica, restarted by the
// supervisor) keeps that isolation.
//
// Thread-safety: every method may be called from any thread at once; see ReplicaTransport.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/recycler.h"
#include "engine/engine.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "trace/trace.h"
#include "wire/replica_transport.h"

namespace petal::server {

// Builds a fresh engine for a replica whose engine failed (called on the restart thread).
using EngineBuilder = std::function<StatusOr<std::unique_ptr<Engine>>()>;

class LocalReplica final : public wire::ReplicaTransport {
 public:
  // Serves `engine` through a new engine loop with `options`; SERVING at once. `rebuild` (may be
  // empty) makes a replacement engine after a fault. Made through Create: a gateway keeps the
  // transport alive from its calls' callbacks, so the last reference can drop on one of this
  // replica's own loop threads, and Create's deleter then destroys it on a fresh thread.
  static std::shared_ptr<LocalReplica> Create(std::unique_ptr<Engine> engine,
                                              EngineLoopOptions options,
                                              EngineBuilder rebuild = {});
  LocalReplica(std::unique_ptr<Engine> engine, EngineLoopOptions options,
               EngineBuilder rebuild = {});
  ~LocalReplica() override;  // Shutdown()

  void EmbedAsync(std::shared_ptr<const v1::EmbedRequest> request,
                  std::chrono::milliseconds timeout, EmbedDone done,
                  const std::string& traceparent = {}) override;
  StatusOr<v1::ModelInfoResponse> ModelInfo() override;
  StatusOr<v1::StatsResponse> Stats() override;
  StatusOr<bool> Serving(const std::string& service = "") override;

  // Stops admitting (new calls get UNAVAILABLE, health turns NOT_SERVING), finishes the admitted
  // work, stops a restart in progress and the loop's threads. Idempotent.
  void Shutdown();

  // A fault drill (`petal serve`'s SIGUSR1): the next batch to complete is treated as an engine
  // fault, exactly as a real one (its requests answer UNAVAILABLE, the engine is rebuilt).
  void InjectFault() { inject_fault_.store(true); }
  // Engines rebuilt after a fault so far.
  int restarts() const { return restarts_.load(); }

 private:
  // One engine and the loop that drives it; replaced whole after a fault. The loop is declared
  // after the engine, so it is destroyed (its threads joined) first.
  struct Core {
    std::unique_ptr<Engine> engine;
    std::unique_ptr<EngineLoop> loop;
  };
  std::shared_ptr<Core> CurrentCore() const;
  std::shared_ptr<Core> MakeCore(std::unique_ptr<Engine> engine);
  // Called (on a completion thread) when `core`'s engine failed: takes it out of service and
  // starts the restart thread, once per core.
  void OnEngineFault(const std::shared_ptr<Core>& core, const Status& why);
  void Restart(std::shared_ptr<Core> failed);

  // One Embed call between admission and answer (recycled: calls_).
  struct Call {
    const Core* core = nullptr;  // the core it was admitted to, by address only
    EmbedDone done;
    std::shared_ptr<trace::Span> span;
    std::string request_id;
  };
  // Answers `call` (on the loop's completion thread, or for a refusal the caller's).
  void Answer(std::unique_ptr<Call> call, const Status& loop_status, EmbedResult* result);
  void Recycle(std::unique_ptr<Call> call);

  Recycler<std::unique_ptr<Call>> calls_{{.max_kept = 256}};
  ServerMetrics metrics_;
  const Clock::time_point started_ = Clock::now();
  const EngineLoopOptions options_;
  const EngineBuilder rebuild_;
  mutable std::mutex mu_;  // guards core_, restart_thread_, stopping_
  std::shared_ptr<Core> core_;
  std::thread restart_thread_;
  bool stopping_ = false;
  std::atomic<bool> serving_{true};
  std::atomic<bool> inject_fault_{false};
  std::atomic<int> restarts_{0};
};

}  // namespace petal::server
