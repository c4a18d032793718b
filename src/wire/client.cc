#include "wire/client.h"

#include <cstring>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "wire/reply_poller.h"

namespace petal::wire {

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
}

PendingCall::~PendingCall() {
  ctx_.TryCancel();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

StatusOr<v1::EmbedResponse> PendingCall::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (!status_.ok()) return FromGrpc(status_);
  return std::move(response_);
}

EmbedClient::EmbedClient(const std::string& address, ReplyPoller* poller) : poller_(poller) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Embedder::NewStub(channel_);
}

namespace {
void SetTimeout(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) {
  if (timeout.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + timeout);
}
}  // namespace

StatusOr<v1::EmbedResponse> EmbedClient::Embed(const v1::EmbedRequest& request,
                                               std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  v1::EmbedResponse resp;
  PETAL_RETURN_IF_ERROR(FromGrpc(stub_->Embed(&ctx, request, &resp)));
  return resp;
}

StatusOr<v1::EmbedResponse> EmbedClient::EmbedBusyPoll(const v1::EmbedRequest& request,
                                                       std::chrono::milliseconds timeout) {
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  SetTimeout(&ctx, timeout);
  v1::EmbedResponse resp;
  grpc::Status status;
  auto rpc = stub_->AsyncEmbed(&ctx, request, &cq);
  rpc->Finish(&resp, &status, &resp);
  void* tag = nullptr;
  bool ok = false;
  for (;;) {  // a zero deadline makes AsyncNext a non-blocking poll
    const auto r = cq.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    if (r == grpc::CompletionQueue::GOT_EVENT) break;
    if (r == grpc::CompletionQueue::SHUTDOWN) return Internal("completion queue shut down");
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  PETAL_RETURN_IF_ERROR(FromGrpc(status));
  return resp;
}

std::unique_ptr<PendingCall> EmbedClient::StartEmbed(v1::EmbedRequest request,
                                                     std::chrono::milliseconds timeout) {
  auto call = std::make_unique<PendingCall>();
  call->request_ = std::move(request);
  SetTimeout(&call->ctx_, timeout);
  PendingCall* c = call.get();
  stub_->async()->Embed(&c->ctx_, &c->request_, &c->response_, [c](grpc::Status s) {
    std::lock_guard<std::mutex> lock(c->mu_);
    c->status_ = std::move(s);
    c->done_ = true;
    c->cv_.notify_all();
  });
  return call;
}

void EmbedClient::EmbedAsync(std::shared_ptr<const v1::EmbedRequest> request,
                             std::chrono::milliseconds timeout, EmbedDone done,
                             const std::string& traceparent) {
  if (poller_ != nullptr) {
    return poller_->Embed(stub_.get(), std::move(request), timeout, std::move(done), traceparent);
  }
  // gRPC needs the context and messages alive until the callback; they die with it.
  struct Call {
    grpc::ClientContext ctx;
    std::shared_ptr<const v1::EmbedRequest> request;
    v1::EmbedResponse response;
    EmbedDone done;
  };
  auto* call = new Call;
  call->request = std::move(request);
  call->done = std::move(done);
  SetTimeout(&call->ctx, timeout);
  if (!traceparent.empty()) call->ctx.AddMetadata("traceparent", traceparent);
  stub_->async()->Embed(&call->ctx, call->request.get(), &call->response, [call](grpc::Status s) {
    std::unique_ptr<Call> owned(call);
    if (s.ok()) {
      owned->done(std::move(owned->response));
    } else {
      owned->done(FromGrpc(s));
    }
  });
}

StatusOr<v1::ModelInfoResponse> EmbedClient::ModelInfo() {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(10000));
  v1::ModelInfoRequest req;
  req.set_protocol_version(1);
  v1::ModelInfoResponse resp;
  PETAL_RETURN_IF_ERROR(FromGrpc(stub_->ModelInfo(&ctx, req, &resp)));
  return resp;
}

StatusOr<v1::StatsResponse> EmbedClient::Stats() {
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(10000));
  v1::StatsResponse resp;
  PETAL_RETURN_IF_ERROR(FromGrpc(stub_->Stats(&ctx, v1::StatsRequest(), &resp)));
  return resp;
}

StatusOr<bool> EmbedClient::Serving(const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  SetTimeout(&ctx, std::chrono::milliseconds(5000));
  grpc::health::v1::HealthCheckRequest req;
  // gRPC's own health service reports the whole server ("") SERVING from the moment it listens,
  // before the server can say it is still loading; the Embedder's entry exists only once the
  // server sets it, so "" asks for that.
  req.set_service(service.empty() ? std::string(v1::Embedder::service_full_name()) : service);
  grpc::health::v1::HealthCheckResponse resp;
  PETAL_RETURN_IF_ERROR(FromGrpc(health->Check(&ctx, req, &resp)));
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

bool EmbedClient::WaitUntilServing(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    auto s = Serving();
    if (s.ok() && *s) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace petal::wire
