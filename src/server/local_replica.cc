// See local_replica.h. Mirrors EmbedServer's Embed handler (server.cc) step for step, minus gRPC,
// plus the engine-fault restart.
#include "server/local_replica.h"

#include <utility>

#include "common/log.h"
#include "server/request.h"
#include "server/server_info.h"
#include "trace/trace.h"
#include "wire/recycled.h"

namespace petal::server {
namespace {

// Errors that mean the engine itself failed (not the request, the queue or the clock).
bool IsEngineFault(const Status& s) {
  const StatusCode c = s.code();
  return c == StatusCode::kInternal || c == StatusCode::kUnknown || c == StatusCode::kDataLoss;
}

}  // namespace

LocalReplica::LocalReplica(std::unique_ptr<Engine> engine, EngineLoopOptions options,
                           EngineBuilder rebuild)
    : options_(std::move(options)), rebuild_(std::move(rebuild)) {
  core_ = MakeCore(std::move(engine));
}

std::shared_ptr<LocalReplica> LocalReplica::Create(std::unique_ptr<Engine> engine,
                                                   EngineLoopOptions options,
                                                   EngineBuilder rebuild) {
  return std::shared_ptr<LocalReplica>(
      new LocalReplica(std::move(engine), std::move(options), std::move(rebuild)),
      [](LocalReplica* r) {
        if (OnEngineLoopThread()) {
          std::thread([r] { delete r; }).detach();
        } else {
          delete r;
        }
      });
}

LocalReplica::~LocalReplica() { Shutdown(); }

std::shared_ptr<LocalReplica::Core> LocalReplica::MakeCore(std::unique_ptr<Engine> engine) {
  auto core = std::make_shared<Core>();
  core->engine = std::move(engine);
  core->loop = std::make_unique<EngineLoop>(core->engine.get(), options_, &metrics_);
  return core;
}

std::shared_ptr<LocalReplica::Core> LocalReplica::CurrentCore() const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_;
}

void LocalReplica::Shutdown() {
  std::shared_ptr<Core> core;
  std::thread restart;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    core = core_;
    restart = std::move(restart_thread_);
  }
  serving_.store(false);
  if (core) core->loop->Shutdown();
  if (restart.joinable()) restart.join();
}

void LocalReplica::EmbedAsync(std::shared_ptr<const v1::EmbedRequest> request_ptr,
                              std::chrono::milliseconds timeout, EmbedDone done,
                              const std::string& traceparent) {
  const v1::EmbedRequest& request = *request_ptr;
  metrics_.requests.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<Core> core = serving_.load() ? CurrentCore() : nullptr;
  if (!core) {
    metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
    done(Unavailable("local replica is not serving (shutting down or restarting its engine)"));
    return;
  }
  StatusOr<EmbedJob> job = JobFromRequest(request, core->engine->config());
  if (!job.ok()) {
    metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
    done(job.status());
    return;
  }
  if (timeout.count() > 0) job->deadline = Clock::now() + timeout;
  // The call's state, from a recycled record: the loop's callback holds only its address (so
  // the callback fits std::function's inline storage), and the record goes back to the list
  // when the call is answered.
  std::unique_ptr<Call> call = calls_.Take();
  if (!call) call = std::make_unique<Call>();
  call->core = core.get();
  call->done = std::move(done);
  call->span = StartEmbedSpan(traceparent, &*job);
  call->request_id = request.request_id();
  // Done with the request: let go of it now, so that it goes back for reuse (wire/recycled.h)
  // as soon as the gateway lets go of it too, whichever thread that happens on.
  request_ptr.reset();
  Call* c = call.get();
  auto admitted = core->loop->Submit(std::move(*job),
                                     [this, c](const Status& loop_status, EmbedResult* result) {
                                       Answer(std::unique_ptr<Call>(c), loop_status, result);
                                     });
  core.reset();
  if (admitted.ok()) {
    call.release();  // owned by the loop's callback now
    return;
  }
  // Refused: Submit did not call the callback.
  if (admitted.status().code() == StatusCode::kInvalidArgument) {
    metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
  } else if (admitted.status().code() != StatusCode::kResourceExhausted) {
    metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
  }
  if (call->span) {
    call->span->SetError(admitted.status().ToString());
    call->span->End();
  }
  EmbedDone refused = std::move(call->done);
  Recycle(std::move(call));
  refused(admitted.status());
}

void LocalReplica::Answer(std::unique_ptr<Call> call, const Status& loop_status,
                          EmbedResult* result) {
  Status status = loop_status;
  if (status.ok() && inject_fault_.exchange(false))
    status = Internal("fault drill: an engine fault was injected (SIGUSR1)");
  if (!status.ok() && IsEngineFault(status)) {
    // The call names its core by address only: holding it would keep a failed engine alive.
    std::shared_ptr<Core> current = CurrentCore();
    if (current.get() == call->core) OnEngineFault(current, status);
    status = Unavailable("local replica: engine fault (" + status.message() +
                         "); the engine is being rebuilt");
  }
  if (call->span) {
    if (!status.ok()) call->span->SetError(status.ToString());
    call->span->End();
  }
  EmbedDone done = std::move(call->done);
  if (!status.ok()) {
    Recycle(std::move(call));
    return done(status);
  }
  // A recycled message: its buffers come back from an answer the gateway has formatted.
  v1::EmbedResponse resp = wire::TakeEmbedResponse();
  FillResponse(call->request_id, result, &resp);
  Recycle(std::move(call));
  done(std::move(resp));
}

void LocalReplica::Recycle(std::unique_ptr<Call> call) {
  call->done = nullptr;
  call->span.reset();
  calls_.Give(std::move(call));
}

void LocalReplica::OnEngineFault(const std::shared_ptr<Core>& core, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (core_ != core || stopping_) return;  // already taken out (or shutting down)
  serving_.store(false);
  core_.reset();
  Log("error", "local replica: engine fault; rebuilding the engine",
      {{"error", why.ToString()}, {"restarts_so_far", std::to_string(restarts_.load())}});
  // A previous restart thread has finished (it installed the core that just failed).
  if (restart_thread_.joinable()) restart_thread_.join();
  restart_thread_ = std::thread([this, failed = core]() mutable { Restart(std::move(failed)); });
}

void LocalReplica::Restart(std::shared_ptr<Core> failed) {
  // Drain the failed loop: its remaining batches fail fast (UNAVAILABLE to the gateway) or finish.
  failed->loop->Shutdown();
  // Calls that copied the core before it was taken out drop their copies at once; the engine
  // must be gone (its device memory freed) before a replacement is built on the same device.
  for (int i = 0; i < 5000 && failed.use_count() > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  failed.reset();
  for (int attempt = 1;; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || !rebuild_) return;
    }
    StatusOr<std::unique_ptr<Engine>> engine = rebuild_();
    if (engine.ok()) {
      std::shared_ptr<Core> fresh = MakeCore(std::move(engine).value());
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        fresh->loop->Shutdown();
        return;
      }
      core_ = std::move(fresh);
      restarts_.fetch_add(1);
      serving_.store(true);
      Log("info", "local replica: engine rebuilt; serving again",
          {{"attempt", std::to_string(attempt)}});
      return;
    }
    Log("error", "local replica: engine rebuild failed; retrying in 1 s",
        {{"attempt", std::to_string(attempt)}, {"error", engine.status().ToString()}});
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
  }
}

StatusOr<v1::ModelInfoResponse> LocalReplica::ModelInfo() {
  std::shared_ptr<Core> core = CurrentCore();
  if (!core) return Unavailable("local replica is restarting its engine");
  v1::ModelInfoResponse resp;
  FillModelInfo(*core->engine, core->loop->options(), &resp);
  return resp;
}

StatusOr<v1::StatsResponse> LocalReplica::Stats() {
  std::shared_ptr<Core> core = CurrentCore();
  if (!core) return Unavailable("local replica is restarting its engine");
  v1::StatsResponse resp;
  FillStats(metrics_, started_, core->loop.get(), &resp);
  return resp;
}

StatusOr<bool> LocalReplica::Serving(const std::string&) { return serving_.load(); }

}  // namespace petal::server
