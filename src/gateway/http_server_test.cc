// Tests of HttpServer alone (no gateway routes): keep-alive, pipelined requests answered in
// order, answers from another thread after a delay, the idle timeout (which is not a timeout on
// the handler) and the arena-backed messages outliving their connection.
#include "gateway/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

namespace petal::gateway {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using namespace std::chrono_literals;

// Slow answers still being given (their threads are detached).
std::atomic<int> g_replying{0};

// Echoes the request's target and body; /slow/N answers after N ms from another thread.
void Echo(HttpRequest&& req, Reply reply) {
  const std::string target(req.target());
  std::string body = target + " " + std::string(std::string_view(req.body()));
  if (target.starts_with("/slow/")) {
    const int ms = std::stoi(target.substr(6));
    g_replying.fetch_add(1);
    std::thread([ms, req = std::move(req), body = std::move(body), reply = std::move(reply)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      HttpResponse res = MakeResponse(200, body, "text/plain");
      res.set("X-Method", std::string(req.method_string()));  // the request is still valid
      reply(std::move(res));
      g_replying.fetch_sub(1);
    }).detach();
    return;
  }
  reply(MakeResponse(200, std::move(body), "text/plain"));
}

struct Client {
  net::io_context io;
  net::ip::tcp::socket sock{io};
  boost::beast::flat_buffer buf;

  explicit Client(uint16_t port) { sock.connect({net::ip::make_address("127.0.0.1"), port}); }
  void Send(const std::string& raw) { net::write(sock, net::buffer(raw)); }
  http::response<http::string_body> Read() {
    http::response<http::string_body> res;
    http::read(sock, buf, res);
    return res;
  }
  // True once the server has closed the connection (reads end of stream).
  bool Closed() {
    char c;
    boost::system::error_code ec;
    net::read(sock, net::buffer(&c, 1), ec);
    return ec == net::error::eof || ec == net::error::connection_reset;
  }
};

std::string Post(const std::string& target, const std::string& body) {
  return "POST " + target +
         " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// A server that, as Reply's contract asks, is destroyed only once every reply has returned: the
// client may read a slow answer while its thread is still inside the socket's write.
struct TestServer {
  std::unique_ptr<HttpServer> server;
  ~TestServer() {
    while (g_replying.load() != 0) std::this_thread::sleep_for(1ms);
  }
  HttpServer* operator->() const { return server.get(); }
};

TestServer Start(int idle_timeout_s = 60, size_t body_limit = 1 << 20) {
  HttpServerOptions o;
  o.port = 0;
  o.idle_timeout_s = idle_timeout_s;
  o.body_limit = body_limit;
  auto s = HttpServer::Start(o, Echo);
  EXPECT_TRUE(s.ok());
  return {s.ok() ? std::move(*s) : nullptr};
}

TEST(HttpServer, APortInUseIsAClearErrorNotACrash) {
  auto first = Start();
  HttpServerOptions o;
  o.port = first->port();
  auto second = HttpServer::Start(o, Echo);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(o.port)),
            std::string::npos)
      << second.status().ToString();
}

TEST(HttpServer, KeepAliveServesManyRequestsOnOneConnection) {
  auto s = Start();
  Client c(s->port());
  for (int i = 0; i < 50; ++i) {
    c.Send(Post("/a", std::string(i * 37, 'x')));
    auto res = c.Read();
    ASSERT_EQ(res.result_int(), 200u);
    EXPECT_EQ(res.body(), "/a " + std::string(i * 37, 'x'));
    EXPECT_EQ(res[http::field::server], "petal-gateway");
    EXPECT_TRUE(res.keep_alive());
  }
  // A body too large for a recycled arena comes from the heap.
  c.Send(Post("/big", std::string(100000, 'b')));
  EXPECT_EQ(c.Read().body().size(), 5u + 100000u);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  auto s = Start();
  Client c(s->port());
  c.Send(Post("/slow/150", "1") + Post("/fast", "2") + Post("/slow/20", "3"));
  auto a = c.Read();
  EXPECT_EQ(a.body(), "/slow/150 1");
  EXPECT_EQ(a["X-Method"], "POST");
  EXPECT_EQ(c.Read().body(), "/fast 2");
  EXPECT_EQ(c.Read().body(), "/slow/20 3");
}

TEST(HttpServer, ConnectionCloseIsHonoured) {
  auto s = Start();
  Client c(s->port());
  c.Send("GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto res = c.Read();
  EXPECT_EQ(res.body(), "/x ");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_TRUE(c.Closed());
}

TEST(HttpServer, BodyOverTheLimitIs413AndCloses) {
  auto s = Start(60, 100);
  Client c(s->port());
  c.Send(Post("/a", std::string(200, 'x')));
  EXPECT_EQ(c.Read().result_int(), 413u);
  EXPECT_TRUE(c.Closed());
}

TEST(HttpServer, IdleConnectionIsClosedAfterTheTimeout) {
  auto s = Start(1);
  Client c(s->port());
  const auto t0 = std::chrono::steady_clock::now();
  c.Send("GET /x HTTP/1.1\r\nHost: x\r\n");  // a header that never ends
  EXPECT_TRUE(c.Closed());
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 900ms);
  EXPECT_LT(waited, 3s);
}

TEST(HttpServer, TheTimeoutCountsFromEachReadNotFromTheConnection) {
  auto s = Start(1);
  Client c(s->port());
  // Requests every 0.4 s for 2 s: always within the timeout of the previous one.
  for (int i = 0; i < 5; ++i) {
    c.Send(Post("/a", "k"));
    EXPECT_EQ(c.Read().body(), "/a k");
    std::this_thread::sleep_for(400ms);
  }
  // A handler slower than the timeout is waited for, then the idle connection is closed.
  c.Send(Post("/slow/1500", "s"));
  EXPECT_EQ(c.Read().body(), "/slow/1500 s");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.Closed());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 900ms);
}

TEST(HttpServer, ARequestMayOutliveItsConnectionAndServer) {
  std::promise<HttpRequest> kept;
  {
    HttpServerOptions o;
    o.port = 0;
    auto s = HttpServer::Start(o, [&kept](HttpRequest&& req, Reply reply) {
      HttpRequest copy = req;  // a copy has its own storage
      kept.set_value(std::move(req));
      reply(MakeResponse(200, std::string(std::string_view(copy.body()))));
    });
    ASSERT_TRUE(s.ok());
    Client c((*s)->port());
    c.Send(Post("/keep", "body"));
    EXPECT_EQ(c.Read().body(), "body");
  }
  HttpRequest req = kept.get_future().get();
  EXPECT_EQ(req.target(), "/keep");
  EXPECT_EQ(std::string_view(req.body()), "body");
  EXPECT_EQ(req[http::field::host], "x");
}

}  // namespace
}  // namespace petal::gateway
