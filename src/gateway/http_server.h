// HttpServer: a small asynchronous HTTP/1.1 server on Boost.Beast with keep-alive, a body size
// limit and a fixed pool of I/O threads. It knows nothing about routes: every complete request is
// handed to one Handler, which answers through a Reply that may be called later from any thread
// (e.g. a gRPC completion thread), so slow work never holds an I/O thread.
//
// Thread-safety: Start/Stop are called by the owning thread. The handler runs on I/O threads,
// concurrently for different connections; requests on one connection are handled one at a time.
//
// Allocation: a request's header fields and body, and a response's header fields, live in a
// RecycledArena (common/recycled_arena.h) taken from the constructing thread's cache, and each
// connection's asynchronous operations use memory of the connection, and the Reply keeps its
// capture inline: serving a small request does not call malloc in this layer
// (bench/results/2026-12-07-http-allocs; the Reply since session 21).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/recycled_arena.h"
#include "common/status.h"
#include "common/unique_function.h"

namespace petal::gateway {

// Header fields in a recycled arena. A copy of a message allocates its own (on the heap).
using HttpFields = boost::beast::http::basic_fields<ArenaAllocator<char>>;
// The request body shares the fields' arena when it fits there; read it as a std::string_view.
using HttpRequestBody =
    boost::beast::http::basic_string_body<char, std::char_traits<char>, ArenaAllocator<char>>;
using HttpRequest = boost::beast::http::request<HttpRequestBody, HttpFields>;
// The response body stays a std::string: routes build it and move it in (MakeResponse).
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body, HttpFields>;
// Sends the response; call exactly once, from any thread, and return from it before the server
// is destroyed: the replying thread starts the socket write itself and may still be inside it
// when the client already has the answer (Gateway counts its in-flight requests for this).
// Move-only (common/unique_function.h): pass it on with std::move, never copy it.
using Reply = UniqueFunction<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest&& request, Reply reply)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 picks a free port
  int threads = 2;
  size_t body_limit = 32u << 20;  // larger bodies get 413
  int idle_timeout_s = 60;        // an idle keep-alive connection is closed after this
};

class HttpServer {
 public:
  // Binds, listens and starts the I/O threads.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                     Handler handler);
  // Stops accepting and closes connections; joins the I/O threads.
  ~HttpServer();
  void Stop();
  // Closes the listening socket: no new connections; open ones are still served.
  void StopAccepting();

  uint16_t port() const { return port_; }
  // The I/O context, for handlers that want to run CPU work on the pool.
  boost::asio::io_context& io() { return io_; }

 private:
  HttpServer() = default;
  struct Listener;

  boost::asio::io_context io_;
  // Keeps the I/O threads running when no socket operation is pending (after StopAccepting,
  // while handlers still owe responses), until Stop.
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::shared_ptr<Listener> listener_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

// A response with `body` and its content type, its fields in an arena of the calling thread. The
// server sets version, keep-alive and Content-Length from the request when it sends it.
HttpResponse MakeResponse(unsigned status, std::string body,
                          const char* content_type = "application/json");

}  // namespace petal::gateway
