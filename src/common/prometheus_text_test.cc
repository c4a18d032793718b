// Tests for the Prometheus text writer and page merging.
#include "common/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace petal {
namespace {

TEST(PrometheusText, SamplesHistogramsAndLabels) {
  PrometheusText t("server=\"a\"");
  t.Scalar("x_total", "counter", "X.", 7);
  const double bounds[] = {0.5, 1};
  const uint64_t cumulative[] = {1, 3, 4};
  t.Histogram("h", "H.", bounds, cumulative, 2.25, 4);
  EXPECT_EQ(t.Take(),
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{server=\"a\"} 7\n"
            "# HELP h H.\n# TYPE h histogram\n"
            "h_bucket{server=\"a\",le=\"0.5\"} 1\nh_bucket{server=\"a\",le=\"1\"} 3\n"
            "h_bucket{server=\"a\",le=\"+Inf\"} 4\nh_sum{server=\"a\"} 2.25\n"
            "h_count{server=\"a\"} 4\n");
  PrometheusText bare;
  bare.Sample("y", 0.1);
  EXPECT_EQ(bare.Take(), "y 0.1\n");
}

TEST(PrometheusText, NumbersRoundTripAndSpecials) {
  EXPECT_EQ(PrometheusNumber(0.1), "0.1");
  EXPECT_EQ(std::stod(PrometheusNumber(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(PrometheusNumber(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusNumber(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(PrometheusNumber(std::nan("")), "NaN");
}

TEST(MergePrometheus, OneHeaderPerFamily) {
  const std::string a = "# HELP x X.\n# TYPE x counter\nx{s=\"a\"} 1\n";
  const std::string b = "# HELP x X.\n# TYPE x counter\nx{s=\"b\"} 2\n";
  EXPECT_EQ(MergePrometheus({a, b}), "# HELP x X.\n# TYPE x counter\nx{s=\"a\"} 1\nx{s=\"b\"} 2\n");
}

}  // namespace
}  // namespace petal
