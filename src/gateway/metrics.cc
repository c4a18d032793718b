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

void LatencyHistogram::Render(std::string* out, std::string_view name,
                              std::string_view help) const {
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
  PrometheusText text;
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

std::string GatewayMetrics::Render() const {
  std::string out;
  out += "# HELP petal_gateway_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE petal_gateway_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_) {
      out += "petal_gateway_requests_total{route=\"" + key.first + "\",status=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
  }
  request_.Render(&out, "petal_gateway_request_seconds",
                  "Time from a complete request to its response.");
  tokenize_.Render(&out, "petal_gateway_tokenize_seconds", "Tokenization time per request.");
  inference_.Render(&out, "petal_gateway_inference_seconds",
                    "Time from sending a request's chunks to the last answer.");
  queue_.Render(&out, "petal_gateway_queue_seconds",
                "Longest server queue wait (admission to first batch) among a request's chunks.");
  out += "# HELP petal_gateway_inputs_total Inputs (texts or token sequences) embedded.\n";
  out += "# TYPE petal_gateway_inputs_total counter\npetal_gateway_inputs_total " +
         std::to_string(inputs_.load()) + "\n";
  out += "# HELP petal_gateway_tokens_total Tokens sent to the servers.\n";
  out += "# TYPE petal_gateway_tokens_total counter\npetal_gateway_tokens_total " +
         std::to_string(tokens_.load()) + "\n";
  out += "# HELP petal_gateway_chunks_total Chunks sent to the servers.\n";
  out += "# TYPE petal_gateway_chunks_total counter\npetal_gateway_chunks_total " +
         std::to_string(chunks_.load()) + "\n";
  return out;
}

}  // namespace petal::gateway
