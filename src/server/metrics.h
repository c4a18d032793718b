// Server metrics: monotonic counters, gauges and fixed-bucket histograms that the Stats RPC
// reports (a gateway turns them into Prometheus metrics). Thread-safety: every member may be
// updated and read from any thread; a snapshot is consistent per histogram, not across them.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace petal::server {

// A histogram with fixed upper bounds and cumulative snapshots (Prometheus semantics).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // bounds.size() + 1; the last is the total count
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

  // Bounds for latencies in seconds, 50 us .. 30 s.
  static std::vector<double> LatencyBounds();
  // Powers of two 1 .. 2^20 for batch sizes.
  static std::vector<double> SizeBounds();

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> requests_ok{0};
  std::atomic<uint64_t> requests_rejected{0};
  std::atomic<uint64_t> requests_invalid{0};
  std::atomic<uint64_t> requests_cancelled{0};
  std::atomic<uint64_t> requests_expired{0};
  std::atomic<uint64_t> requests_failed{0};
  std::atomic<uint64_t> sequences{0};
  std::atomic<uint64_t> tokens{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> sequences_dropped{0};
  Histogram request_latency_s{Histogram::LatencyBounds()};
  Histogram queue_wait_s{Histogram::LatencyBounds()};
  Histogram step_latency_s{Histogram::LatencyBounds()};
  Histogram batch_tokens{Histogram::SizeBounds()};
  Histogram batch_sequences{Histogram::SizeBounds()};
};

}  // namespace petal::server
