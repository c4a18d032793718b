// Beast plumbing: one Listener accepting on a strand, one Session per connection reading one
// request at a time (HTTP/1.1 pipelining is served in order because the next read starts only
// after the previous response has been written).
//
// Once a connection is warm, serving a request allocates nothing here: messages use recycled
// arenas (http_server.h), the Reply keeps its capture inline (UniqueFunction), the session keeps
// its parser, response serializer and the memory of its asynchronous operations (HandlerMemory),
// and the idle timeout is a timer armed once per idle period rather than per read
// (beast::basic_stream armed and cancelled it once per read, through a type-erased executor that
// allocated each time).
#include "gateway/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <string_view>

#include "wire/recycled.h"

namespace petal::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
// Each connection's I/O runs on its own strand, named by its concrete type: the type-erased
// any_io_executor of beast::tcp_stream allocated on every operation for a strand (~19 of the
// serving process's ~94 allocations per request, bench/results/2026-12-06-session15).
using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::basic_stream_socket<tcp, Strand>;
using Timer = net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Strand>;

// The replying thread (for an engine's answer: the engine loop's completion thread) starts the
// answer's write itself rather than handing it to an I/O thread: one thread hand-off fewer per
// request. PETAL_HTTP_DIRECT_REPLY=0 restores the hand-off (for A/B measurements; on the H200 the
// direct write measured 0.01-0.02 ms faster at 1 client, docs/performance.md "Serving path").
const bool kWriteFromReplier = [] {
  const char* e = std::getenv("PETAL_HTTP_DIRECT_REPLY");
  return e == nullptr || std::string_view(e) != "0";
}();

// Memory for one connection's asynchronous operations. Asio allocates every pending operation
// (a socket read or write, a hand-off to the strand) through its completion handler's associated
// allocator, and frees it before calling the handler, so a chain of operations reuses one slot.
// Without this each came from a per-thread one-block cache, which missed whenever the block was
// freed on another thread or was too small: ~4 mallocs per request. Slots are claimed with an
// atomic flag because the replying thread may start a write while an I/O thread finishes an
// operation of the same connection; anything larger or beyond the slots uses the heap.
class HandlerMemory {
 public:
  void* Allocate(size_t bytes) {
    if (bytes <= kSlotBytes) {
      for (Slot& s : slots_) {
        if (!s.used.exchange(true, std::memory_order_acquire)) return s.bytes;
      }
    }
    return ::operator new(bytes);
  }
  void Deallocate(void* p) {
    for (Slot& s : slots_) {
      if (p == s.bytes) return s.used.store(false, std::memory_order_release);
    }
    ::operator delete(p);
  }

 private:
  // The largest operation (a body read through Beast's composed operations) took 344 bytes; one
  // or two are pending at once (an operation and the strand hand-off of another's completion).
  static constexpr size_t kSlots = 3;
  static constexpr size_t kSlotBytes = 512;
  struct Slot {
    alignas(std::max_align_t) unsigned char bytes[kSlotBytes];
    std::atomic<bool> used{false};
  };
  Slot slots_[kSlots];
};

template <typename T>
class HandlerAllocator {
 public:
  using value_type = T;
  explicit HandlerAllocator(HandlerMemory* m) noexcept : memory_(m) {}
  template <typename U>
  HandlerAllocator(const HandlerAllocator<U>& o) noexcept : memory_(o.memory_) {}  // NOLINT
  T* allocate(size_t n) { return static_cast<T*>(memory_->Allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { memory_->Deallocate(p); }
  template <typename U>
  bool operator==(const HandlerAllocator<U>& o) const noexcept {
    return memory_ == o.memory_;
  }

 private:
  template <typename U>
  friend class HandlerAllocator;
  HandlerMemory* memory_;
};

// A completion handler whose operations allocate from a connection's HandlerMemory. It must keep
// the connection (and so the memory) alive: `f` holds the session's shared_ptr.
template <typename F>
class MemoryHandler {
 public:
  using allocator_type = HandlerAllocator<char>;
  MemoryHandler(HandlerMemory* m, F f) : memory_(m), f_(std::move(f)) {}
  allocator_type get_allocator() const noexcept { return allocator_type(memory_); }
  template <typename... Args>
  void operator()(Args&&... args) {
    f_(std::forward<Args>(args)...);
  }

 private:
  HandlerMemory* memory_;
  F f_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Socket socket, std::shared_ptr<Handler> handler, const HttpServerOptions& o)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        handler_(std::move(handler)),
        body_limit_(o.body_limit),
        idle_timeout_(o.idle_timeout_s) {
    buffer_.reserve(kFirstBuffer);  // a typical request (headers and body) in one read
  }

  void Run() {
    // Start on the connection's strand so that every handler of this session is serialised.
    net::dispatch(socket_.get_executor(), Bind([self = shared_from_this()] { self->Read(); }));
  }

 private:
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  template <typename F>
  MemoryHandler<F> Bind(F f) {
    return MemoryHandler<F>(&memory_, std::move(f));
  }

  void Read() {
    // The request's fields and body share one arena of this thread.
    const auto alloc = ArenaAllocator<char>::Recycled();
    parser_.emplace(std::piecewise_construct, std::make_tuple(alloc), std::make_tuple(alloc));
    parser_->body_limit(body_limit_);
    StartIdleTimeout();
    http::async_read_header(socket_, buffer_, *parser_,
                            Bind([self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnHeader(ec, n);
                            }));
  }

  // The idle timeout covers a whole request read (header, 100-continue, body). The timer is not
  // re-armed per read: it waits for the first deadline, then for the latest one, and closes the
  // socket only if a read is still pending past it. It holds the session weakly, so that a closed
  // connection does not live on until it fires, and uses the default handler memory, as it may
  // complete after the session (and its HandlerMemory) is gone.
  void StartIdleTimeout() {
    read_deadline_ = Clock::now() + std::chrono::seconds(idle_timeout_);
    if (!timer_armed_) ArmTimer();
  }
  void ArmTimer() {
    timer_armed_ = true;
    timer_.expires_at(read_deadline_);
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      if (auto self = weak.lock()) self->OnTimer(ec);
    });
  }
  void OnTimer(beast::error_code ec) {
    timer_armed_ = false;
    if (ec || read_deadline_ == kNever) return;  // no read pending: the next one re-arms it
    if (Clock::now() < read_deadline_) return ArmTimer();
    socket_.close(ec);  // the pending read fails and the session ends
  }

  // Clients such as curl send `Expect: 100-continue` with large bodies and wait (curl: 1 s) for
  // an interim 100 response before sending the body; answer it at once.
  void OnHeader(beast::error_code ec, size_t n) {
    if (ec) return OnRead(ec, n);
    const auto& req = parser_->get();
    const auto expect = req[http::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(socket_, *cont,
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
    http::async_read(
        socket_, buffer_, *parser_,
        Bind([self = shared_from_this()](beast::error_code ec, size_t n) { self->OnRead(ec, n); }));
  }

  void OnRead(beast::error_code ec, size_t) {
    // The handler may wait on the servers for a long time; no read timeout while it does.
    read_deadline_ = kNever;
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
    HttpRequest req = parser_->release();
    // An idle keep-alive connection does not keep a large request's buffer.
    if (buffer_.capacity() > kKeepBuffer) buffer_.shrink_to_fit();
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    auto self = shared_from_this();
    // Kept inline in the Reply (no allocation). It owns the session, so that a handler dropping
    // its Reply closes the connection rather than leaking it.
    Reply reply = [self, version, keep_alive](HttpResponse res) {
      res.version(version);
      res.keep_alive(keep_alive);
      res.prepare_payload();
      if (kWriteFromReplier) {
        // The session has no operation pending between this read and its answer's write (the
        // next read starts in OnWrite; the idle timer touches nothing while no read is pending),
        // so the replying thread may start the write itself: the socket usually takes the bytes
        // at once, without waking an I/O thread. The write's completion still runs on the
        // session's strand.
        return self->Write(std::move(res));
      }
      net::post(self->socket_.get_executor(), self->Bind([self, res = std::move(res)]() mutable {
        self->Write(std::move(res));
      }));
    };
    (*handler_)(std::move(req), std::move(reply));
  }

  void Write(HttpResponse res) {
    // Through a serializer of the session's: writing the message itself would allocate one.
    response_.emplace(std::move(res));
    serializer_.emplace(*response_);
    const bool close = response_->need_eof();
    http::async_write(socket_, *serializer_,
                      Bind([self = shared_from_this(), close](beast::error_code ec, size_t) {
                        self->OnWrite(close, ec);
                      }));
  }

  void OnWrite(bool close, beast::error_code ec) {
    serializer_.reset();
    // The body's buffer goes back for the next answer's JSON (gateway::JsonOut).
    wire::RecycleByteBuffer(std::move(response_->body()));
    response_.reset();
    if (ec) return;
    if (close) return Close();
    Read();
  }

  void Close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
  }

  HandlerMemory memory_;  // first: destroyed last
  Socket socket_;
  Timer timer_;
  bool timer_armed_ = false;                  // on the strand
  Clock::time_point read_deadline_ = kNever;  // on the strand; kNever while no read is pending
  static constexpr uint64_t kMaxReserve = 8u << 20;  // bytes reserved ahead for one body
  static constexpr size_t kKeepBuffer = 1u << 20;    // larger buffers are released after a read
  static constexpr size_t kFirstBuffer = 16u << 10;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<HttpRequestBody, ArenaAllocator<char>>> parser_;
  std::optional<HttpResponse> response_;  // the answer being written (kept for async_write)
  std::optional<http::response_serializer<http::string_body, HttpFields>> serializer_;
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
  if (!listener_) return;  // Start failed before listening (e.g. the port is taken)
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
  HttpResponse res{std::piecewise_construct, std::make_tuple(),
                   std::make_tuple(ArenaAllocator<char>::Recycled())};
  res.result(static_cast<http::status>(status));
  res.version(11);
  res.set(http::field::server, "petal-gateway");
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

}  // namespace petal::gateway
