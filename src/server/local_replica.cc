// See local_replica.h. Mirrors EmbedServer's Embed handler (server.cc) step for step, minus gRPC.
#include "server/local_replica.h"

#include <utility>

#include "server/request.h"
#include "server/server_info.h"
#include "trace/trace.h"

namespace petal::server {

LocalReplica::LocalReplica(std::unique_ptr<Engine> engine, EngineLoopOptions options)
    : engine_(std::move(engine)),
      loop_(std::make_unique<EngineLoop>(engine_.get(), std::move(options), &metrics_)) {}

LocalReplica::~LocalReplica() { Shutdown(); }

void LocalReplica::Shutdown() {
  serving_.store(false);
  loop_->Shutdown();
}

void LocalReplica::EmbedAsync(v1::EmbedRequest request, std::chrono::milliseconds timeout,
                              EmbedDone done, const std::string& traceparent) {
  metrics_.requests.fetch_add(1, std::memory_order_relaxed);
  if (!serving_.load()) {
    metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
    done(Unavailable("local replica is shutting down"));
    return;
  }
  StatusOr<EmbedJob> job = JobFromRequest(request, engine_->config());
  if (!job.ok()) {
    metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
    done(job.status());
    return;
  }
  if (timeout.count() > 0) job->deadline = Clock::now() + timeout;
  std::shared_ptr<trace::Span> span = StartEmbedSpan(traceparent, &*job);
  // `done` is shared between the loop's callback and the refusal path below: Submit either
  // admits (and the callback runs exactly once later) or refuses without calling it.
  auto shared_done = std::make_shared<EmbedDone>(std::move(done));
  auto admitted =
      loop_->Submit(std::move(*job), [shared_done, span, request_id = request.request_id()](
                                         const Status& status, EmbedResult* result) {
        if (span) {
          if (!status.ok()) span->SetError(status.ToString());
          span->End();
        }
        if (!status.ok()) {
          (*shared_done)(status);
          return;
        }
        v1::EmbedResponse resp;
        FillResponse(request_id, result, &resp);
        (*shared_done)(std::move(resp));
      });
  if (!admitted.ok()) {
    if (admitted.status().code() == StatusCode::kInvalidArgument) {
      metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
    } else if (admitted.status().code() != StatusCode::kResourceExhausted) {
      metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
    }
    if (span) {
      span->SetError(admitted.status().ToString());
      span->End();
    }
    (*shared_done)(admitted.status());
  }
}

StatusOr<v1::ModelInfoResponse> LocalReplica::ModelInfo() {
  v1::ModelInfoResponse resp;
  FillModelInfo(*engine_, loop_->options(), &resp);
  return resp;
}

StatusOr<v1::StatsResponse> LocalReplica::Stats() {
  v1::StatsResponse resp;
  FillStats(metrics_, started_, loop_.get(), &resp);
  return resp;
}

StatusOr<bool> LocalReplica::Serving(const std::string&) { return serving_.load(); }

}  // namespace petal::server
