// `--otlp-endpoint` for `petal gateway`, `petal serve` and `petal server`: process-wide request
// tracing exported as OTLP/HTTP JSON (src/trace). Off unless the flag is given.
// Thread-safety: called during start-up and shutdown only.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "common/log.h"
#include "trace/otlp_exporter.h"

namespace petal::cli {

inline void AddTraceFlag(CLI::App* app, std::string* endpoint) {
  app->add_option("--otlp-endpoint", *endpoint,
                  "Export request traces as OTLP/HTTP JSON to this collector, e.g. "
                  "http://127.0.0.1:4318 (POST .../v1/traces; off by default)");
}

// Holds the exporter while the command runs; declare it before anything that makes spans, so
// that it is destroyed after them (the destructor turns tracing off, then flushes).
class Tracing {
 public:
  // False (logged) when the endpoint is malformed; an empty endpoint leaves tracing off.
  bool Start(const std::string& endpoint, const std::string& service_name) {
    if (endpoint.empty()) return true;
    trace::OtlpOptions o;
    o.endpoint = endpoint;
    o.service_name = service_name;
    auto e = trace::OtlpExporter::Start(o);
    if (!e.ok()) {
      Log("error", "cannot start tracing", {{"error", e.status().ToString()}});
      return false;
    }
    exporter_ = std::move(e).value();
    trace::SetExporter(exporter_.get());
    Log("info", "tracing on", {{"otlp", exporter_->url()}, {"service", service_name}});
    return true;
  }
  ~Tracing() {
    if (!exporter_) return;
    trace::SetExporter(nullptr);
    const auto s = exporter_->Stats();
    exporter_.reset();  // flushes what is buffered
    Log("info", "tracing stopped",
        {{"exported", std::to_string(s.exported)},
         {"dropped", std::to_string(s.dropped)},
         {"failed", std::to_string(s.failed)}});
  }

 private:
  std::unique_ptr<trace::OtlpExporter> exporter_;
};

}  // namespace petal::cli
