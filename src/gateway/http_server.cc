// Beast plumbing: one Listener accepting on a strand, one Session per connection reading one
// request at a time (HTTP/1.1 pipelining is served in order because the next read starts only
// after the previous response has been written).
#include "gateway/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <cstdlib>
#include <future>
#include <optional>
#include <string_view>

namespace petal::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
// Each connection's I/O runs on its own strand, named by its concrete type: the type-erased
// any_io_executor of beast::tcp_stream allocated on every operation for a strand (~19 of the
// serving process's ~94 allocations per request, bench/results/2026-12-06-session15).
using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::basic_stream_socket<tcp, Strand>;
using Stream = beast::basic_stream<tcp, Strand>;

// The replying thread (for an engine's answer: the engine loop's completion thread) starts the
// answer's write itself rather than handing it to an I/O thread: one thread hand-off fewer per
// request. PETAL_HTTP_DIRECT_REPLY=0 restores the hand-off (for A/B measurements; on the H200 the
// direct write measured 0.01-0.02 ms faster at 1 client, docs/performance.md "Serving path").
const bool kWriteFromReplier = [] {
  const char* e = std::getenv("PETAL_HTTP_DIRECT_REPLY");
  return e == nullptr || std::string_view(e) != "0";
}();

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Socket socket, std::shared_ptr<Handler> handler, const HttpServerOptions& o)
      : stream_(std::move(socket)),
        handler_(std::move(handler)),
        body_limit_(o.body_limit),
        idle_timeout_(o.idle_timeout_s) {
    buffer_.reserve(kFirstBuffer);  // a typical request (headers and body) in one read
  }

  void Run() {
    // Start on the connection's strand so that every handler of this session is serialised.
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(body_limit_);
    stream_.expires_after(std::chrono::seconds(idle_timeout_));
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  // Clients such as curl send `Expect: 100-continue` with large bodies and wait (curl: 1 s) for
  // an interim 100 response before sending the body; answer it at once.
  void OnHeader(beast::error_code ec, size_t n) {
    if (ec) return OnRead(ec, n);
    const auto& req = parser_->get();
    const auto expect = req[http::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](beast::error_code wec, size_t) {
                          if (wec) return;
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // Room for the whole body at once: otherwise the buffer grows by doubling from the header's
    // size and the body arrives in many small reads (a 133 KB body took ~1 ms to read, not 0.05).
    // Capped, so that a header alone cannot make the gateway reserve body_limit bytes.
    if (const auto len = parser_->content_length(); len && *len > 0) {
      buffer_.reserve(buffer_.size() + static_cast<size_t>(std::min<uint64_t>(*len, kMaxReserve)));
    }
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::end_of_stream) return Close();
    if (ec == http::error::body_limit) {
      HttpResponse res = MakeResponse(
          413, "{\"error\":{\"message\":\"request body exceeds " + std::to_string(body_limit_) +
                   " bytes\",\"type\":\"invalid_request_error\",\"param\":null}}");
      res.version(11);
      res.keep_alive(false);  // the rest of the body is unread: the connection cannot continue
      res.prepare_payload();
      return Write(std::move(res));
    }
    if (ec) return;  // reset, timeout or malformed HTTP: drop the connection
    // The handler may wait on the servers for a long time; no read timeout while it does.
    stream_.expires_never();
    HttpRequest req = parser_->release();
    // An idle keep-alive connection does not keep a large request's buffer.
    if (buffer_.capacity() > kKeepBuffer) buffer_.shrink_to_fit();
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    auto self = shared_from_this();
    Reply reply = [self, version, keep_alive](HttpResponse res) {
      res.version(version);
      res.keep_alive(keep_alive);
      res.prepare_payload();
      if (kWriteFromReplier) {
        // The session has no operation pending between this read and its answer's write (the
        // next read starts in OnWrite), so the replying thread may start the write itself: the
        // socket usually takes the bytes at once, without waking an I/O thread. The write's
        // completion still runs on the session's strand.
        return self->Write(std::move(res));
      }
      net::post(self->stream_.get_executor(),
                [self, res = std::move(res)]() mutable { self->Write(std::move(res)); });
    };
    (*handler_)(std::move(req), std::move(reply));
  }

  void Write(HttpResponse res) {
    response_.emplace(std::move(res));
    const bool close = response_->need_eof();
    http::async_write(stream_, *response_,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this(), close));
  }

  void OnWrite(bool close, beast::error_code ec, size_t) {
    response_.reset();
    if (ec) return;
    if (close) return Close();
    Read();
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  Stream stream_;
  static constexpr uint64_t kMaxReserve = 8u << 20;  // bytes reserved ahead for one body
  static constexpr size_t kKeepBuffer = 1u << 20;    // larger buffers are released after a read
  static constexpr size_t kFirstBuffer = 16u << 10;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<HttpResponse> response_;  // the answer being written (kept for async_write)
  std::shared_ptr<Handler> handler_;
  size_t body_limit_;
  int idle_timeout_;
};

}  // namespace

struct HttpServer::Listener : std::enable_shared_from_this<HttpServer::Listener> {
  Listener(net::io_context& io, HttpServerOptions o, std::shared_ptr<Handler> h)
      : io(io), acceptor(net::make_strand(io)), options(std::move(o)), handler(std::move(h)) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(io.get_executor()),
                          beast::bind_front_handler(&Listener::OnAccept, shared_from_this()));
  }
  void OnAccept(beast::error_code ec, Socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), handler, options)->Run();
    }
    Accept();
  }

  net::io_context& io;
  tcp::acceptor acceptor;
  HttpServerOptions options;
  std::shared_ptr<Handler> handler;
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                        Handler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return InvalidArgument("listen: bad address '" + options.host + "': " + ec.message());
  auto listener =
      std::make_shared<Listener>(s->io_, options, std::make_shared<Handler>(std::move(handler)));
  tcp::endpoint endpoint(address, options.port);
  auto& acc = listener->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec) acc.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(endpoint, ec);
  if (!ec) acc.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("listen: cannot listen on " + options.host + ":" +
                       std::to_string(options.port) + ": " + ec.message());
  }
  s->port_ = acc.local_endpoint().port();
  s->listener_ = listener;
  listener->Accept();
  s->work_.emplace(s->io_.get_executor());
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    s->threads_.emplace_back([io = &s->io_] { io->run(); });
  }
  return s;
}

void HttpServer::StopAccepting() {
  // The acceptor belongs to its strand: close it there, and wait so that no connection is
  // accepted after this returns.
  auto closed = std::make_shared<std::promise<void>>();
  auto done = closed->get_future();
  net::post(listener_->acceptor.get_executor(), [l = listener_, closed] {
    beast::error_code ec;
    l->acceptor.close(ec);
    closed->set_value();
  });
  done.wait_for(std::chrono::seconds(5));
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  StopAccepting();
  io_.stop();
  work_.reset();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

HttpServer::~HttpServer() { Stop(); }

HttpResponse MakeResponse(unsigned status, std::string body, const char* content_type) {
  HttpResponse res{static_cast<http::status>(status), 11};
  res.set(http::field::server, "petal-gateway");
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

}  // namespace petal::gateway
