// EmbedServer: the gRPC inference server. Serves petal.v1.Embedder (Embed, ModelInfo, Stats)
// and the standard grpc.health.v1 health service with gRPC's asynchronous callback API: a
// handler validates, admits the request into the EngineLoop and returns; the response is sent
// from the loop's completion thread, so no gRPC thread ever waits on the engine.
//
// Lifecycle: Start() listens at once with health NOT_SERVING (Embed answers UNAVAILABLE while the
// model loads); AttachEngine() makes it SERVING; Shutdown() turns health NOT_SERVING, stops
// accepting RPCs, lets in-flight requests finish (cancelling any left after the grace period)
// and stops the engine loop. Thread-safety: AttachEngine and Shutdown from one controlling
// thread; everything else is internal.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/engine.h"
#include "server/engine_loop.h"

namespace petal::server {

struct ServerOptions {
  std::string listen = "0.0.0.0:50051";  // host:port; port 0 picks a free one (see port())
  EngineLoopOptions loop;
  int max_message_bytes = 256 << 20;  // largest request or response
  // > 0: a thread polls the gRPC sockets for this long after each request and answer
  // (grpc_poller.h); 0: gRPC's threads sleep in epoll between events.
  int grpc_poll_us = 0;
};

class EmbedServer {
 public:
  static StatusOr<std::unique_ptr<EmbedServer>> Start(const ServerOptions& options);
  ~EmbedServer();  // Shutdown(0)

  // Serves `engine` from now on (the server owns it); health becomes SERVING. Call once.
  void AttachEngine(std::unique_ptr<Engine> engine);
  // Port actually bound.
  int port() const;
  // Graceful stop: see the file comment. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

  class Impl;

 private:
  explicit EmbedServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace petal::server
