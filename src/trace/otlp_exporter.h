// OtlpExporter: sends finished spans to an OpenTelemetry collector as OTLP/HTTP JSON
// (POST <endpoint>/v1/traces) over libcurl, from its own thread, in batches.
//
// Requests never wait on the collector: Export() appends to a bounded buffer under a mutex held
// for a push_back only (no I/O, no allocation beyond the span's own), and drops the span, counted,
// when the buffer is full (collector down or slow). The thread sends a batch every
// `flush_interval` or as soon as `max_batch` spans are waiting; a failed POST drops its batch
// (counted) rather than retrying into a growing backlog.
//
// Thread-safety: Export from any thread; Stats from any thread; the destructor flushes what is
// buffered (one last POST, bounded by the timeout) and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "trace/trace.h"

namespace petal::trace {

struct OtlpOptions {
  std::string endpoint;  // http://host:4318 (".../v1/traces" appended unless present)
  std::string service_name = "petal";
  size_t max_buffered = 4096;  // spans waiting to be sent; beyond: dropped
  size_t max_batch = 512;      // spans per POST
  std::chrono::milliseconds flush_interval{500};
  std::chrono::milliseconds timeout{2000};  // per POST (connect included)
};

struct OtlpStats {
  uint64_t exported = 0;  // spans the collector accepted (2xx)
  uint64_t dropped = 0;   // spans dropped: buffer full
  uint64_t failed = 0;    // spans of POSTs that failed
};

// The OTLP/HTTP JSON body (ExportTraceServiceRequest) for `spans` of one service.
std::string OtlpJson(const std::vector<SpanRecord>& spans, const std::string& service_name);

class OtlpExporter final : public Exporter {
 public:
  static StatusOr<std::unique_ptr<OtlpExporter>> Start(OtlpOptions options);
  ~OtlpExporter() override;
  void Export(SpanRecord&& span) override;
  OtlpStats Stats() const;
  const std::string& url() const { return url_; }

 private:
  explicit OtlpExporter(OtlpOptions options);
  void Run();
  bool Post(const std::string& body);  // true on a 2xx answer

  const OtlpOptions options_;
  std::string url_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SpanRecord> buffer_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::atomic<uint64_t> exported_{0}, dropped_{0}, failed_{0};
  void* curl_ = nullptr;  // CURL*, used by the exporter's thread only
  std::thread thread_;
};

}  // namespace petal::trace
