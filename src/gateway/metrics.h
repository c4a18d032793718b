// The gateway's own Prometheus metrics: requests by route and status, latency histograms for the
// whole request, tokenization and inference (all chunks on the servers), and input/token counts.
// Each served model has its own (rendered with its model="<name>" label), and the gateway one
// more for requests that use no model (health, docs, unknown names). Rendered in the text
// exposition format (0.0.4) together with replica health and each replica's server stats
// (wire::StatsToPrometheus); the text is written with common/prometheus_text.h.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace petal::gateway {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  void Observe(double seconds);
  // Appends the histogram's samples named `name` (HELP/TYPE lines included).
  // `labels` (without braces, may be empty) goes on every sample.
  void Render(std::string* out, std::string_view name, std::string_view help,
              std::string_view labels = "") const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBounds.size() + 1> counts_{};
  double sum_ = 0;
  uint64_t count_ = 0;
};

class GatewayMetrics {
 public:
  void Request(std::string_view route, unsigned status, double seconds);
  void Tokenized(double seconds, int64_t inputs, int64_t tokens);
  void Inference(double seconds) { inference_.Observe(seconds); }
  // The longest server-side queue wait among a request's chunks.
  void Queue(double seconds) { queue_.Observe(seconds); }
  void Chunks(int64_t n) { chunks_ += n; }
  // The gateway's families (petal_gateway_*), every sample labelled `labels` (e.g.
  // `model="minilm"`; may be empty). !model_families: only the requests' count and latency (the
  // page of requests that use no model).
  std::string Render(std::string_view labels = "", bool model_families = true) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, unsigned>, uint64_t> requests_;
  LatencyHistogram request_;
  LatencyHistogram tokenize_;
  LatencyHistogram inference_;
  LatencyHistogram queue_;
  std::atomic<int64_t> inputs_{0};
  std::atomic<int64_t> tokens_{0};
  std::atomic<int64_t> chunks_{0};
};

}  // namespace petal::gateway
