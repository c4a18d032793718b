// Helpers for the gateway end-to-end tests: a tiny keep-alive HTTP/1.1 client on Boost.Beast
// whose every exchange is bounded in time (a hung gateway fails the test instead of hanging it),
// plus JSON and golden-file helpers. Thread-safety: an HttpClient belongs to one thread.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace petal::gateway::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct HttpResult {
  unsigned status = 0;  // 0: no answer (connection failed or timed out)
  std::string body;
  std::string content_type;
  std::string retry_after;
  bool keep_alive = false;
};

class HttpClient {
 public:
  explicit HttpClient(uint16_t port, std::chrono::seconds timeout = std::chrono::seconds(30))
      : port_(port), timeout_(timeout) {}

  HttpResult Get(const std::string& target) { return Do(http::verb::get, target, ""); }
  // Sends `Authorization: Bearer key` from now on (empty: none).
  void SetApiKey(const std::string& key) { api_key_ = key; }
  HttpResult Post(const std::string& target, const std::string& body) {
    return Do(http::verb::post, target, body);
  }

  // One exchange on the kept-alive connection (reconnecting if the server closed it).
  HttpResult Do(http::verb verb, const std::string& target, const std::string& body) {
    HttpResult out;
    if (!stream_ || !stream_->socket().is_open()) {
      io_.restart();
      stream_.emplace(io_);
      beast::error_code ec;
      stream_->socket().connect({net::ip::make_address("127.0.0.1"), port_}, ec);
      if (ec) {
        stream_.reset();
        return out;
      }
      connections_++;
    }
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
    req.body() = body;
    req.prepare_payload();
    http::response<http::string_body> res;
    beast::flat_buffer buffer;
    bool done = false;
    beast::error_code result;
    stream_->expires_after(timeout_);
    http::async_write(*stream_, req, [&](beast::error_code ec, size_t) {
      if (ec) {
        result = ec;
        done = true;
        return;
      }
      http::async_read(*stream_, buffer, res, [&](beast::error_code ec2, size_t) {
        result = ec2;
        done = true;
      });
    });
    io_.restart();
    io_.run();
    if (!done || result) {
      stream_.reset();
      return out;
    }
    out.status = res.result_int();
    out.body = res.body();
    out.content_type = std::string(res[http::field::content_type]);
    out.keep_alive = res.keep_alive();
    out.retry_after = std::string(res[http::field::retry_after]);
    if (!res.keep_alive()) stream_.reset();
    return out;
  }
  int connections() const { return connections_; }

 private:
  uint16_t port_;
  std::chrono::seconds timeout_;
  net::io_context io_;
  std::optional<beast::tcp_stream> stream_;
  int connections_ = 0;
  std::string api_key_;
};

// Builds `{"input": [...texts...], <extra>}` with the texts JSON-escaped (quotes, backslashes).
inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

inline std::string JsonStrings(const std::vector<std::string>& texts) {
  std::string out = "[";
  for (size_t i = 0; i < texts.size(); ++i) out += (i ? "," : "") + JsonString(texts[i]);
  return out + "]";
}

// The `data[*].embedding` float arrays of an OpenAI embeddings response, by `index`.
inline std::vector<std::vector<float>> Embeddings(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::vector<std::vector<float>> out;
  if (parser.parse(body).get(doc)) return out;
  simdjson::dom::array data;
  if (doc["data"].get_array().get(data)) return out;
  out.resize(data.size());
  for (simdjson::dom::element d : data) {
    int64_t index = -1;
    if (d["index"].get_int64().get(index) || index < 0 || index >= int64_t(out.size())) return {};
    simdjson::dom::array e;
    if (d["embedding"].get_array().get(e)) return {};
    for (simdjson::dom::element v : e) out[index].push_back(static_cast<float>(double(v)));
  }
  return out;
}

inline double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return -2;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

inline std::string SourceDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return s ? s : ".";
}

}  // namespace petal::gateway::testing
