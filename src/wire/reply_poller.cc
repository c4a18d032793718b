#include "wire/reply_poller.h"

#include <memory>

#include "wire/client.h"

namespace petal::wire {

struct ReplyPoller::Call {
  grpc::ClientContext ctx;
  std::shared_ptr<const v1::EmbedRequest> request;
  v1::EmbedResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::EmbedResponse>> rpc;
  ReplicaTransport::EmbedDone done;
};

ReplyPoller::ReplyPoller(std::chrono::microseconds spin) : spin_(spin) {
  thread_ = std::thread([this] { Main(); });
}

ReplyPoller::~ReplyPoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Call* c : calls_) c->ctx.TryCancel();
  }
  // The cancelled calls still complete through the queue; the queue may only shut down after.
  while (inflight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cq_.Shutdown();
  thread_.join();
}

void ReplyPoller::Embed(v1::Embedder::Stub* stub, std::shared_ptr<const v1::EmbedRequest> request,
                        std::chrono::milliseconds timeout, ReplicaTransport::EmbedDone done,
                        const std::string& traceparent) {
  auto* c = new Call;
  c->request = std::move(request);
  c->done = std::move(done);
  if (timeout.count() > 0) c->ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!traceparent.empty()) c->ctx.AddMetadata("traceparent", traceparent);
  inflight_.fetch_add(1);
  // Set up under mu_: the poller takes mu_ before it touches the call, so everything written
  // here happens-before its use there (also as ThreadSanitizer sees it: gRPC's own ordering is
  // invisible to it).
  std::lock_guard<std::mutex> lock(mu_);
  calls_.insert(c);
  c->rpc = stub->PrepareAsyncEmbed(&c->ctx, *c->request, &cq_);
  c->rpc->StartCall();
  c->rpc->Finish(&c->response, &c->status, c);
}

void ReplyPoller::Main() {
  using Clock = std::chrono::steady_clock;
  auto hot_until = Clock::now();
  for (;;) {
    void* tag = nullptr;
    bool ok = false;
    const bool hot = inflight_.load(std::memory_order_relaxed) > 0 || Clock::now() < hot_until;
    // A zero deadline polls the queue (and the sockets behind it) without sleeping.
    const auto r =
        hot ? cq_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC))
            : cq_.AsyncNext(&tag, &ok,
                            std::chrono::system_clock::now() + std::chrono::milliseconds(20));
    if (r == grpc::CompletionQueue::SHUTDOWN) return;
    if (r != grpc::CompletionQueue::GOT_EVENT) continue;
    std::unique_ptr<Call> c(static_cast<Call*>(tag));
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.erase(c.get());
    }
    hot_until = Clock::now() + spin_;
    if (c->status.ok()) {
      c->done(std::move(c->response));
    } else {
      c->done(FromGrpc(c->status));
    }
    c.reset();
    inflight_.fetch_sub(1);  // last: the destructor waits for this
  }
}

}  // namespace petal::wire
