#include "gateway/metrics.h"

#include <algorithm>
#include <charconv>

namespace petal::gateway {
namespace {

std::string Num(double v) {
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace

void LatencyHistogram::Observe(double seconds) {
  const size_t i = std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin();
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;
  sum_ += seconds;
  count_++;
}

void LatencyHistogram::Render(std::string* out, std::string_view name,
                              std::string_view help) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string n(name);
  *out += "# HELP " + n + " " + std::string(help) + "\n# TYPE " + n + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    *out += n + "_bucket{le=\"" + Num(kBounds[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += n + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += n + "_sum " + Num(sum_) + "\n" + n + "_count " + std::to_string(count_) + "\n";
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

std::string MergePrometheus(const std::vector<std::string>& pages) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::string>> families;  // name -> (head, samples)
  for (const std::string& page : pages) {
    std::string current;
    size_t pos = 0;
    while (pos < page.size()) {
      size_t end = page.find('\n', pos);
      if (end == std::string::npos) end = page.size();
      const std::string_view line(page.data() + pos, end - pos);
      pos = end + 1;
      if (line.empty()) continue;
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        const std::string_view rest = line.substr(7);
        current = std::string(rest.substr(0, rest.find(' ')));
        auto [it, inserted] = families.try_emplace(current);
        if (inserted) order.push_back(current);
        // The head comes from the first page that names the family.
        if (it->second.first.find(std::string(line.substr(0, 7))) == std::string::npos) {
          it->second.first.append(line).push_back('\n');
        }
        continue;
      }
      if (line.front() == '#') continue;
      auto [it, inserted] = families.try_emplace(current);
      if (inserted) order.push_back(current);
      it->second.second.append(line).push_back('\n');
    }
  }
  std::string out;
  for (const auto& name : order) out += families[name].first + families[name].second;
  return out;
}

}  // namespace petal::gateway
