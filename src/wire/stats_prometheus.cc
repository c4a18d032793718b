#include "wire/stats_prometheus.h"

#include <vector>

#include "common/prometheus_text.h"

namespace petal::wire {
namespace {

// Families named petal_server_<name>, written through the shared text writer.
class Writer {
 public:
  explicit Writer(std::string labels) : text_(std::move(labels)) {}

  void Scalar(const char* name, const char* type, const char* help, double v) {
    text_.Scalar(std::string("petal_server_") + name, type, help, v);
  }

  void Hist(const char* name, const char* help, const v1::Histogram& h) {
    // The proto's counts are already cumulative, one more than bounds (+Inf).
    std::vector<double> bounds(h.bounds().begin(), h.bounds().end());
    std::vector<uint64_t> counts(h.counts().begin(), h.counts().end());
    text_.Histogram(std::string("petal_server_") + name, help, bounds, counts, h.sum(), h.count());
  }

  void EngineStats(const google::protobuf::Map<std::string, double>& m) {
    if (m.empty()) return;
    text_.Header("petal_server_engine_stat", "gauge", "Engine counters by name (Engine::Stats)");
    for (const auto& [k, v] : m) text_.Sample("petal_server_engine_stat", v, "name=\"" + k + "\"");
  }

  std::string Take() { return text_.Take(); }

 private:
  PrometheusText text_;
};

}  // namespace

std::string StatsToPrometheus(const v1::StatsResponse& s, const std::string& labels) {
  Writer w(labels);
  w.Scalar("uptime_seconds", "gauge", "Seconds since the server started", s.uptime_us() * 1e-6);
  w.Scalar("requests_total", "counter", "Embed RPCs received", s.requests());
  w.Scalar("requests_ok_total", "counter", "Embed RPCs answered OK", s.requests_ok());
  w.Scalar("requests_rejected_total", "counter", "Embed RPCs rejected: queue full",
           s.requests_rejected());
  w.Scalar("requests_invalid_total", "counter", "Embed RPCs rejected: invalid argument",
           s.requests_invalid());
  w.Scalar("requests_cancelled_total", "counter", "Embed RPCs cancelled by the client",
           s.requests_cancelled());
  w.Scalar("requests_expired_total", "counter", "Embed RPCs past their deadline",
           s.requests_expired());
  w.Scalar("requests_failed_total", "counter", "Embed RPCs failed: engine error, loading, shutdown",
           s.requests_failed());
  w.Scalar("sequences_total", "counter", "Sequences run through the engine", s.sequences());
  w.Scalar("tokens_total", "counter", "Tokens run through the engine", s.tokens());
  w.Scalar("batches_total", "counter", "Batches run through the engine", s.batches());
  w.Scalar("sequences_dropped_total", "counter", "Cancelled or expired sequences dropped unrun",
           s.sequences_dropped());
  w.Scalar("queue_requests", "gauge", "Admitted requests not yet answered", s.queue_requests());
  w.Scalar("queue_tokens", "gauge", "Tokens of admitted requests not yet answered",
           s.queue_tokens());
  w.Scalar("pending_sequences", "gauge", "Sequences waiting for a batch", s.pending_sequences());
  w.Scalar("inflight_batches", "gauge", "Batches on the engine", s.inflight_batches());
  w.Hist("request_latency_seconds", "Admission to response", s.request_latency_s());
  w.Hist("queue_wait_seconds", "Admission to the request's first batch", s.queue_wait_s());
  w.Hist("step_latency_seconds", "Batch submitted to result collected", s.step_latency_s());
  w.Hist("batch_tokens", "Tokens per batch", s.batch_tokens());
  w.Hist("batch_sequences", "Sequences per batch", s.batch_sequences());
  w.EngineStats(s.engine());
  return w.Take();
}

}  // namespace petal::wire
