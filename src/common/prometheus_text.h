// Writing the Prometheus text exposition format (version 0.0.4): metric family headers, samples
// with labels, cumulative histograms, and merging several pages so that each family appears once.
// Shared by the server's Stats page (wire/stats_prometheus.h) and the gateway's own metrics.
// Thread-safety: a PrometheusText is used by one thread; the free functions are pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace petal {

// The shortest decimal text that reads back as `v` ("+Inf", "-Inf", "NaN" for the specials).
std::string PrometheusNumber(double v);

class PrometheusText {
 public:
  // `labels` (e.g. `server="10.0.0.5:50051"`, without braces; may be empty) is attached to every
  // sample written.
  explicit PrometheusText(std::string labels = "") : labels_(std::move(labels)) {}

  // "# HELP name help" and "# TYPE name type".
  void Header(std::string_view name, std::string_view type, std::string_view help);
  // "name{labels,extra} value"; `extra` is more labels without braces (may be empty).
  void Sample(std::string_view name, double value, std::string_view extra = "");
  // Header + one sample.
  void Scalar(std::string_view name, std::string_view type, std::string_view help, double value);
  // A histogram family: `cumulative[i]` observations <= bounds[i]; cumulative has one entry more
  // than bounds (the +Inf bucket, equal to count).
  void Histogram(std::string_view name, std::string_view help, std::span<const double> bounds,
                 std::span<const uint64_t> cumulative, double sum, uint64_t count);

  std::string& str() { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string Labels(std::string_view extra) const;
  std::string labels_;
  std::string out_;
};

// Merges text pages (e.g. one per replica) so that each metric family appears once, its HELP/TYPE
// lines from the first page followed by the samples of every page, as the text format requires.
std::string MergePrometheus(const std::vector<std::string>& pages);

}  // namespace petal
