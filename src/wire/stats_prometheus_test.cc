// Tests for the Prometheus rendering of server stats.
#include "wire/stats_prometheus.h"

#include <gtest/gtest.h>

namespace petal::wire {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Prometheus, CountersGaugesHistogramsAndEngineStats) {
  v1::StatsResponse s;
  s.set_requests(7);
  s.set_requests_ok(5);
  s.set_queue_tokens(123);
  auto* h = s.mutable_batch_tokens();
  h->add_bounds(1);
  h->add_bounds(2);
  h->add_counts(1);
  h->add_counts(3);
  h->add_counts(4);
  h->set_sum(9.5);
  h->set_count(4);
  (*s.mutable_engine())["graph_replays"] = 42;
  const std::string text = StatsToPrometheus(s, "server=\"a:1\"");
  EXPECT_TRUE(Has(text, "# TYPE petal_server_requests_total counter"));
  EXPECT_TRUE(Has(text, "petal_server_requests_total{server=\"a:1\"} 7"));
  EXPECT_TRUE(Has(text, "petal_server_requests_ok_total{server=\"a:1\"} 5"));
  EXPECT_TRUE(Has(text, "# TYPE petal_server_queue_tokens gauge"));
  EXPECT_TRUE(Has(text, "petal_server_queue_tokens{server=\"a:1\"} 123"));
  EXPECT_TRUE(Has(text, "# TYPE petal_server_batch_tokens histogram"));
  EXPECT_TRUE(Has(text, "petal_server_batch_tokens_bucket{server=\"a:1\",le=\"1\"} 1"));
  EXPECT_TRUE(Has(text, "petal_server_batch_tokens_bucket{server=\"a:1\",le=\"2\"} 3"));
  EXPECT_TRUE(Has(text, "petal_server_batch_tokens_bucket{server=\"a:1\",le=\"+Inf\"} 4"));
  EXPECT_TRUE(Has(text, "petal_server_batch_tokens_sum{server=\"a:1\"} 9.5"));
  EXPECT_TRUE(Has(text, "petal_server_batch_tokens_count{server=\"a:1\"} 4"));
  EXPECT_TRUE(Has(text, "petal_server_engine_stat{server=\"a:1\",name=\"graph_replays\"} 42"));
}

TEST(Prometheus, NoLabels) {
  v1::StatsResponse s;
  s.set_batches(3);
  const std::string text = StatsToPrometheus(s);
  EXPECT_TRUE(Has(text, "petal_server_batches_total 3"));
  EXPECT_EQ(text.find("engine_stat"), std::string::npos);  // no engine counters, no family
}

}  // namespace
}  // namespace petal::wire
