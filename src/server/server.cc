#include "server/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "petal.grpc.pb.h"
#include "server/grpc_poller.h"
#include "server/request.h"
#include "server/server_info.h"
#include "trace/trace.h"

namespace petal::server {
namespace {

grpc::Status ToGrpc(const Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(GrpcCode(s.code())), s.message());
}

// What serves requests once the model is loaded. Created once, lives until the server is gone.
struct Backend {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<EngineLoop> loop;
};

}  // namespace

class EmbedServer::Impl final : public v1::Embedder::CallbackService {
 public:
  explicit Impl(ServerOptions options) : options_(std::move(options)) {}

  ServerOptions options_;
  ServerMetrics metrics_;
  const Clock::time_point started_ = Clock::now();
  std::atomic<Backend*> backend_{nullptr};
  std::unique_ptr<Backend> backend_owner_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcPoller> poller_;  // --grpc-poll-us > 0 only
  int port_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;

  // One Embed call: admitted into the loop, answered from the loop's completion path.
  class EmbedReactor final : public grpc::ServerUnaryReactor {
   public:
    EmbedReactor(Impl* impl, grpc::CallbackServerContext* ctx, const v1::EmbedRequest* req,
                 v1::EmbedResponse* resp)
        : impl_(impl) {
      if (impl->poller_) impl->poller_->Touch();
      impl->metrics_.requests.fetch_add(1, std::memory_order_relaxed);
      Backend* backend = impl->backend_.load(std::memory_order_acquire);
      if (backend == nullptr) {
        impl->metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "model is still loading"));
        return;
      }
      StatusOr<EmbedJob> job = JobFromRequest(*req, backend->engine->config());
      if (!job.ok()) {
        impl->metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
        Finish(ToGrpc(job.status()));
        return;
      }
      // gRPC's deadline is wall-clock; the loop works in steady time. Deadlines more than a day
      // away count as none (and cannot overflow the conversion).
      const auto left = ctx->deadline() - std::chrono::system_clock::now();
      if (left < std::chrono::hours(24)) job->deadline = Clock::now() + left;
      std::string request_id = req->request_id();
      // Tracing (off unless --otlp-endpoint): this call's server span, child of the gateway's
      // chunk span named by the `traceparent` metadata.
      std::string_view traceparent;
      if (trace::Enabled()) {
        const auto& md = ctx->client_metadata();
        if (auto it = md.find("traceparent"); it != md.end())
          traceparent = std::string_view(it->second.data(), it->second.size());
      }
      std::shared_ptr<trace::Span> span = StartEmbedSpan(traceparent, &*job);
      // The callback runs once, before Finish; `resp` stays valid until OnDone.
      auto admitted = backend->loop->Submit(
          std::move(*job),
          [this, resp, request_id, span](const Status& status, EmbedResult* result) {
            if (impl_->poller_) impl_->poller_->Touch();  // the answer goes out next
            if (status.ok()) FillResponse(request_id, result, resp);
            if (span) {
              if (!status.ok()) span->SetError(status.ToString());
              span->End();
            }
            Finish(ToGrpc(status));
          });
      if (!admitted.ok()) {
        // RESOURCE_EXHAUSTED is counted by the loop; keep the other outcomes adding up too.
        if (admitted.status().code() == StatusCode::kInvalidArgument) {
          impl->metrics_.requests_invalid.fetch_add(1, std::memory_order_relaxed);
        } else if (admitted.status().code() != StatusCode::kResourceExhausted) {
          impl->metrics_.requests_failed.fetch_add(1, std::memory_order_relaxed);
        }
        Finish(ToGrpc(admitted.status()));
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        handle_ = std::move(admitted).value();
      }
      // A cancellation that raced with admission still has to drop the work.
      if (ctx->IsCancelled()) OnCancel();
    }

    void OnCancel() override {
      RequestHandle h;
      {
        std::lock_guard<std::mutex> lock(mu_);
        h = handle_;
      }
      if (!h) return;
      Backend* backend = impl_->backend_.load(std::memory_order_acquire);
      // gRPC reports an expired deadline as a cancellation too; both just drop the work.
      backend->loop->Cancel(
          h, Status(StatusCode::kCancelled, "request cancelled or deadline expired"));
    }

    void OnDone() override { delete this; }

   private:
    Impl* const impl_;
    std::mutex mu_;
    RequestHandle handle_;
  };

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* ctx, const v1::EmbedRequest* req,
                                  v1::EmbedResponse* resp) override {
    return new EmbedReactor(this, ctx, req, resp);
  }

  grpc::ServerUnaryReactor* ModelInfo(grpc::CallbackServerContext* ctx, const v1::ModelInfoRequest*,
                                      v1::ModelInfoResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    Backend* backend = backend_.load(std::memory_order_acquire);
    if (backend == nullptr) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "model is still loading"));
      return reactor;
    }
    FillModelInfo(*backend->engine, backend->loop->options(), resp);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx, const v1::StatsRequest*,
                                  v1::StatsResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    Backend* backend = backend_.load(std::memory_order_acquire);
    FillStats(metrics_, started_, backend ? backend->loop.get() : nullptr, resp);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  void SetHealth(bool serving) {
    if (auto* health = server_->GetHealthCheckService()) {
      // The default service only knows names it has been told about: the whole server ("") and
      // the Embedder service.
      health->SetServingStatus("", serving);
      health->SetServingStatus(v1::Embedder::service_full_name(), serving);
    }
  }
};

EmbedServer::EmbedServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EmbedServer::~EmbedServer() { Shutdown(std::chrono::milliseconds(0)); }

StatusOr<std::unique_ptr<EmbedServer>> EmbedServer::Start(const ServerOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // gRPC enables SO_REUSEPORT by default, which lets a second server silently share the port
  // (and half the traffic); a busy port must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &impl->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(impl.get());
  if (options.grpc_poll_us > 0) {
    impl->poller_ =
        std::make_unique<GrpcPoller>(&builder, std::chrono::microseconds(options.grpc_poll_us));
  }
  impl->server_ = builder.BuildAndStart();
  if (!impl->server_ || impl->port_ == 0)
    return Unavailable("could not listen on " + options.listen);
  if (impl->poller_) impl->poller_->Start();
  impl->SetHealth(false);
  return std::unique_ptr<EmbedServer>(new EmbedServer(std::move(impl)));
}

void EmbedServer::AttachEngine(std::unique_ptr<Engine> engine) {
  auto backend = std::make_unique<Backend>();
  backend->engine = std::move(engine);
  backend->loop =
      std::make_unique<EngineLoop>(backend->engine.get(), impl_->options_.loop, &impl_->metrics_);
  impl_->backend_.store(backend.get(), std::memory_order_release);
  impl_->backend_owner_ = std::move(backend);
  impl_->SetHealth(true);
}

int EmbedServer::port() const { return impl_->port_; }

void EmbedServer::Shutdown(std::chrono::milliseconds grace) {
  std::lock_guard<std::mutex> lock(impl_->shutdown_mu_);
  if (impl_->shut_down_) return;
  impl_->shut_down_ = true;
  impl_->SetHealth(false);
  if (auto* health = impl_->server_->GetHealthCheckService()) health->Shutdown();
  // Stops accepting calls and waits for in-flight ones, which the engine loop keeps completing;
  // past the deadline gRPC cancels what is left (OnCancel drops it from the loop).
  impl_->server_->Shutdown(std::chrono::system_clock::now() + grace);
  if (impl_->backend_owner_) impl_->backend_owner_->loop->Shutdown();
  impl_->server_->Wait();
  if (impl_->poller_) impl_->poller_->Shutdown();  // its queue drains after the server's
}

}  // namespace petal::server
