#include "gateway/metrics.h"

#include <algorithm>

#include "common/prometheus_text.h"

namespace petal::gateway {

void LatencyHistogram::Observe(double seconds) {
  const size_t i = std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin();
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;
  sum_ += seconds;
  count_++;
}

void LatencyHistogram::Render(std::string* out, std::string_view name, std::string_view help,
                              std::string_view labels) const {
  std::array<uint64_t, kBounds.size() + 1> cumulative{};
  double sum = 0;
  uint64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t c = 0;
    for (size_t i = 0; i < counts_.size(); ++i) cumulative[i] = c += counts_[i];
    sum = sum_;
    count = count_;
  }
  PrometheusText text{std::string(labels)};
  text.Histogram(name, help, kBounds, cumulative, sum, count);
  *out += text.Take();
}

void GatewayMetrics::Request(std::string_view route, unsigned status, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_[{std::string(route), status}]++;
  }
  request_.Observe(seconds);
}

void GatewayMetrics::Tokenized(double seconds, int64_t inputs, int64_t tokens) {
  tokenize_.Observe(seconds);
  inputs_ += inputs;
  tokens_ += tokens;
}

std::string GatewayMetrics::Render(std::string_view labels, bool model_families) const {
  const std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
  std::string out;
  out += "# HELP petal_gateway_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE petal_gateway_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_) {
      out += "petal_gateway_requests_total{" + prefix + "route=\"" + key.first + "\",status=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
  }
  request_.Render(&out, "petal_gateway_request_seconds",
                  "Time from a complete request to its response.", labels);
  if (!model_families) return out;
  tokenize_.Render(&out, "petal_gateway_tokenize_seconds", "Tokenization time per request.",
                   labels);
  inference_.Render(&out, "petal_gateway_inference_seconds",
                    "Time from sending a request's chunks to the last answer.", labels);
  queue_.Render(&out, "petal_gateway_queue_seconds",
                "Longest server queue wait (admission to first batch) among a request's chunks.",
                labels);
  PrometheusText t{std::string(labels)};
  t.Scalar("petal_gateway_inputs_total", "counter", "Inputs (texts or token sequences) embedded.",
           static_cast<double>(inputs_.load()));
  t.Scalar("petal_gateway_tokens_total", "counter", "Tokens sent to the servers.",
           static_cast<double>(tokens_.load()));
  t.Scalar("petal_gateway_chunks_total", "counter", "Chunks sent to the servers.",
           static_cast<double>(chunks_.load()));
  return out + t.Take();
}

}  // namespace petal::gateway
