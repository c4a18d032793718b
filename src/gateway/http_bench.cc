#include "gateway/http_bench.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "gateway/json_writer.h"

namespace petal::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

constexpr const char* kWords[] = {
    "the",   "quick", "brown",  "fox",   "jumps", "over",  "lazy",  "dog",   "and",    "a",
    "time",  "year",  "people", "way",   "day",   "man",   "thing", "world", "life",   "hand",
    "part",  "child", "eye",    "woman", "place", "work",  "week",  "case",  "point",  "number",
    "group", "fact",  "good",   "new",   "first", "last",  "long",  "great", "little", "own",
    "other", "old",   "right",  "big",   "high",  "small", "large", "next",  "early",  "young"};

}  // namespace

std::string BenchText(int words, uint64_t seed) {
  std::string s;
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (int i = 0; i < words; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (i) s.push_back(' ');
    s += kWords[x % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return s;
}

void AddServerTiming(std::string_view header,
                     std::vector<std::pair<std::string, std::vector<double>>>* phases) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view entry = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    const size_t semi = entry.find(';');
    const size_t dur = entry.find("dur=");
    if (semi == std::string_view::npos || dur == std::string_view::npos) continue;
    const std::string name(entry.substr(0, semi));
    const double ms = std::strtod(std::string(entry.substr(dur + 4)).c_str(), nullptr);
    auto it = std::find_if(phases->begin(), phases->end(),
                           [&](const auto& p) { return p.first == name; });
    if (it == phases->end()) it = phases->insert(phases->end(), {name, {}});
    it->second.push_back(ms);
  }
}

StatusOr<HttpBenchResult> RunHttpBench(const HttpBenchSpec& spec) {
  HttpBenchResult result;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  Clock::time_point first_timed = Clock::time_point::max(), last_timed = Clock::time_point::min();
  for (int c = 0; c < spec.concurrency; ++c) {
    threads.emplace_back([&, c] {
      net::io_context io;
      beast::tcp_stream stream(io);
      beast::error_code ec;
      stream.socket().connect({net::ip::make_address(spec.host, ec), spec.port}, ec);
      if (ec) {
        std::lock_guard<std::mutex> lock(mu);
        result.errors++;
        if (result.first_error.empty()) result.first_error = "connect: " + ec.message();
        return;
      }
      // Texts longer than the model's maximum (MiniLM: 256) are truncated by the gateway.
      std::vector<double> samples;
      std::vector<std::pair<std::string, std::vector<double>>> phases;
      beast::flat_buffer buffer;
      // The timed window opens when this client's warm-up ends: on a slow backend the warm-up
      // alone can outlast `seconds`.
      Clock::time_point timed_start = Clock::now(), end = timed_start;
      const Clock::time_point warm_until =
          timed_start + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(spec.warmup_seconds));
      bool warming = true;
      int timed = 0;
      for (int i = 0; !stop; ++i) {
        if (warming && i >= spec.warmup && Clock::now() >= warm_until) {
          warming = false;
          timed_start = Clock::now();
          end = timed_start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(spec.seconds));
        }
        // At least one timed attempt; failed attempts count too, so errors cannot loop forever.
        if (!warming && timed > 0 && (timed >= spec.max_iters || Clock::now() > end)) break;
        if (!warming) ++timed;
        JsonOut body;
        body.Raw("{\"input\":")
            .Str(BenchText(spec.words, (uint64_t(c) << 32) | i))
            .Raw(",\"truncate\":true}");
        http::request<http::string_body> req{http::verb::post, "/v1/embeddings", 11};
        req.set(http::field::host, spec.host);
        req.set(http::field::content_type, "application/json");
        req.keep_alive(true);
        req.body() = body.Take();
        req.prepare_payload();
        http::response<http::string_body> res;
        const auto t0 = Clock::now();
        http::write(stream, req, ec);
        if (!ec) http::read(stream, buffer, res, ec);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (ec || res.result_int() != 200) {
          std::lock_guard<std::mutex> lock(mu);
          result.errors++;
          if (result.first_error.empty()) {
            result.first_error = ec ? ec.message() : res.body().substr(0, 200);
          }
          if (ec) return;  // the connection is gone
          continue;
        }
        if (!warming) {
          samples.push_back(ms);
          const auto st = res["Server-Timing"];
          AddServerTiming(std::string_view(st.data(), st.size()), &phases);
        }
        if (i == 0 && c == 0) {
          // After truncation to the model's maximum: MiniLM, for one, stops at 256 tokens.
          const std::string key = "\"prompt_tokens\":";
          const size_t at = res.body().find(key);
          if (at != std::string::npos) {
            std::lock_guard<std::mutex> lock(mu);
            result.prompt_tokens = std::atoi(res.body().c_str() + at + key.size());
          }
        }
      }
      const auto timed_end = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      result.latency_ms.insert(result.latency_ms.end(), samples.begin(), samples.end());
      for (auto& [name, v] : phases) {
        auto it = std::find_if(result.phases_ms.begin(), result.phases_ms.end(),
                               [&](const auto& p) { return p.first == name; });
        if (it == result.phases_ms.end())
          it = result.phases_ms.insert(result.phases_ms.end(), {name, {}});
        it->second.insert(it->second.end(), v.begin(), v.end());
      }
      if (!samples.empty()) {
        first_timed = std::min(first_timed, timed_start);
        last_timed = std::max(last_timed, timed_end);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Requests per second over the timed windows only (warm-up excluded).
  result.wall_s = std::max(0.0, std::chrono::duration<double>(last_timed - first_timed).count());
  if (result.latency_ms.empty()) {
    return Unavailable("no request succeeded: " + result.first_error);
  }
  return result;
}

}  // namespace petal::gateway
