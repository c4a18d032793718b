#include "server/prometheus.h"

#include <cstdio>

namespace petal::server {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  explicit Writer(std::string labels) : labels_(std::move(labels)) {}

  void Scalar(const char* name, const char* type, const char* help, double v) {
    Header(name, type, help);
    out_ += std::string("petal_server_") + name + Labels("") + " " + Num(v) + "\n";
  }

  void Hist(const char* name, const char* help, const v1::Histogram& h) {
    Header(name, "histogram", help);
    const std::string base = std::string("petal_server_") + name;
    for (int i = 0; i < h.counts_size(); ++i) {
      const std::string le = i < h.bounds_size() ? Num(h.bounds(i)) : "+Inf";
      out_ += base + "_bucket" + Labels("le=\"" + le + "\"") + " " + Num(h.counts(i)) + "\n";
    }
    out_ += base + "_sum" + Labels("") + " " + Num(h.sum()) + "\n";
    out_ += base + "_count" + Labels("") + " " + Num(h.count()) + "\n";
  }

  void EngineStats(const google::protobuf::Map<std::string, double>& m) {
    if (m.empty()) return;
    Header("engine_stat", "gauge", "Engine counters by name (Engine::Stats)");
    for (const auto& [k, v] : m) {
      out_ += "petal_server_engine_stat" + Labels("name=\"" + k + "\"") + " " + Num(v) + "\n";
    }
  }

  std::string Take() { return std::move(out_); }

 private:
  void Header(const char* name, const char* type, const char* help) {
    out_ += std::string("# HELP petal_server_") + name + " " + help + "\n";
    out_ += std::string("# TYPE petal_server_") + name + " " + type + "\n";
  }
  std::string Labels(const std::string& extra) const {
    if (labels_.empty() && extra.empty()) return "";
    if (labels_.empty()) return "{" + extra + "}";
    if (extra.empty()) return "{" + labels_ + "}";
    return "{" + labels_ + "," + extra + "}";
  }

  std::string labels_;
  std::string out_;
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

}  // namespace petal::server
