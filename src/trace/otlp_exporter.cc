#include "trace/otlp_exporter.h"

#include <curl/curl.h>

#include <cstdio>

#include "common/json_literal.h"
#include "common/log.h"

namespace petal::trace {
namespace {

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

std::string OtlpJson(const std::vector<SpanRecord>& spans, const std::string& service_name) {
  std::string o;
  o.reserve(256 + spans.size() * 320);
  o +=
      R"({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":)";
  AppendJsonLiteral(&o, service_name);
  o += R"(}}]},"scopeSpans":[{"scope":{"name":"petal"},"spans":[)";
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanRecord& s = spans[i];
    if (i) o += ',';
    o += R"({"traceId":")" + Hex(s.context.trace_id.data(), 16) + R"(","spanId":")" +
         Hex(s.context.span_id.data(), 8) + '"';
    bool root = true;
    for (uint8_t b : s.parent_span_id) root &= b == 0;
    if (!root) o += R"(,"parentSpanId":")" + Hex(s.parent_span_id.data(), 8) + '"';
    o += R"(,"name":)";
    AppendJsonLiteral(&o, s.name);
    o += R"(,"kind":)" + std::to_string(static_cast<int>(s.kind));
    // OTLP JSON writes 64-bit integers as decimal strings.
    o += R"(,"startTimeUnixNano":")" + std::to_string(s.start_unix_ns) +
         R"(","endTimeUnixNano":")" + std::to_string(s.end_unix_ns) + R"(","attributes":[)";
    bool first = true;
    for (const auto& [k, v] : s.int_attributes) {
      if (!first) o += ',';
      first = false;
      o += R"({"key":)";
      AppendJsonLiteral(&o, k);
      o += R"(,"value":{"intValue":")" + std::to_string(v) + R"("}})";
    }
    for (const auto& [k, v] : s.string_attributes) {
      if (!first) o += ',';
      first = false;
      o += R"({"key":)";
      AppendJsonLiteral(&o, k);
      o += R"(,"value":{"stringValue":)";
      AppendJsonLiteral(&o, v);
      o += "}}";
    }
    o += ']';
    if (!s.error.empty()) {
      o += R"(,"status":{"code":2,"message":)";  // STATUS_CODE_ERROR
      AppendJsonLiteral(&o, s.error);
      o += '}';
    }
    o += '}';
  }
  o += "]}]}]}";
  return o;
}

OtlpExporter::OtlpExporter(OtlpOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Start(OtlpOptions options) {
  if (!options.endpoint.starts_with("http://") && !options.endpoint.starts_with("https://")) {
    return InvalidArgument("otlp-endpoint: expected http://host:port[/path], got '" +
                           options.endpoint + "'");
  }
  if (options.max_buffered == 0 || options.max_batch == 0) {
    return InvalidArgument("otlp: buffer and batch sizes must be positive");
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  std::unique_ptr<OtlpExporter> e(new OtlpExporter(std::move(options)));
  std::string url = e->options_.endpoint;
  while (url.ends_with("/")) url.pop_back();
  if (!url.ends_with("/v1/traces")) url += "/v1/traces";
  e->url_ = url;
  e->buffer_.reserve(e->options_.max_batch);
  e->thread_ = std::thread([p = e.get()] { p->Run(); });
  return e;
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Export(SpanRecord&& span) {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (buffer_.size() >= options_.max_buffered) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    buffer_.push_back(std::move(span));
    notify = buffer_.size() == options_.max_batch;
  }
  if (notify) cv_.notify_one();
}

OtlpStats OtlpExporter::Stats() const {
  return {exported_.load(), dropped_.load(), failed_.load()};
}

void OtlpExporter::Run() {
  curl_ = curl_easy_init();  // one connection, kept alive between batches
  std::vector<SpanRecord> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, options_.flush_interval,
                 [&] { return stopping_ || buffer_.size() >= options_.max_batch; });
    const bool last = stopping_;
    while (!buffer_.empty()) {
      // Take at most one batch; the rest stays buffered (and counts against the bound).
      const size_t n = std::min(buffer_.size(), options_.max_batch);
      batch.assign(std::make_move_iterator(buffer_.begin()),
                   std::make_move_iterator(buffer_.begin() + n));
      buffer_.erase(buffer_.begin(), buffer_.begin() + n);
      lock.unlock();
      const bool ok = Post(OtlpJson(batch, options_.service_name));
      (ok ? exported_ : failed_).fetch_add(batch.size(), std::memory_order_relaxed);
      batch.clear();
      lock.lock();
      if (!ok) break;  // the collector is not answering: wait for the next interval
    }
    if (last) break;
  }
  lock.unlock();
  curl_easy_cleanup(static_cast<CURL*>(curl_));
  curl_ = nullptr;
}

bool OtlpExporter::Post(const std::string& body) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return false;
  curl_easy_reset(curl);
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
  const CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  const bool ok = rc == CURLE_OK && code >= 200 && code < 300;
  if (!ok) {
    // At most one line per 10 s: a collector that is down must not flood the logs.
    static auto last = std::chrono::steady_clock::time_point{};
    const auto now = std::chrono::steady_clock::now();
    if (now - last > std::chrono::seconds(10)) {
      last = now;
      Log("warn", "otlp export failed",
          {{"url", url_},
           {"error", rc == CURLE_OK ? "HTTP " + std::to_string(code) : curl_easy_strerror(rc)}});
    }
  }
  return ok;
}

}  // namespace petal::trace
