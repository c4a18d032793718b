#include "server/metrics.h"

#include <algorithm>

namespace petal::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  // Bucket i holds values in (bounds[i-1], bounds[i]]; the last one is +Inf.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  s.cumulative.resize(counts_.size());
  uint64_t acc = 0;
  for (size_t i = 0; i < counts_.size(); ++i) s.cumulative[i] = acc += counts_[i];
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> Histogram::LatencyBounds() {
  return {50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 20e-3,
          50e-3, 100e-3, 200e-3, 500e-3, 1.0,  2.0,  5.0,  10.0,  30.0};
}

std::vector<double> Histogram::SizeBounds() {
  std::vector<double> b;
  for (int i = 0; i <= 20; ++i) b.push_back(static_cast<double>(1 << i));
  return b;
}

}  // namespace petal::server
