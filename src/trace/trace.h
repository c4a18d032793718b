// Request tracing: W3C trace context (`traceparent`), spans, and the process-wide exporter they
// go to (OTLP/HTTP, otlp_exporter.h). Tracing is off unless SetExporter was called at start-up;
// off, every call here is a branch on one pointer: no allocation, no lock, no clock read.
//
// Thread-safety: SetExporter once before serving (not concurrently with spans). Spans are
// owned by one thread at a time (moved, or shared behind a shared_ptr by the caller); Current
// and ScopedContext are per thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace petal::trace {

// A W3C trace context: 16-byte trace id, 8-byte span id, flags (bit 0: sampled).
struct SpanContext {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0;
  // Both ids non-zero (an all-zero id is invalid in W3C trace context).
  bool valid() const;
  bool sampled() const { return (flags & 1) != 0; }
};

// Parses a `traceparent` header value ("00-<32 hex>-<16 hex>-<2 hex>"); nullopt when malformed,
// an id is all zeros, or the version is ff. Future versions are read by their first four fields.
std::optional<SpanContext> ParseTraceparent(std::string_view value);
// The `traceparent` value of `ctx` (version 00).
std::string FormatTraceparent(const SpanContext& ctx);
std::string Hex(const uint8_t* bytes, size_t n);

enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };

// A finished (or running) span as the exporter sees it.
struct SpanRecord {
  SpanContext context;
  std::array<uint8_t, 8> parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  uint64_t start_unix_ns = 0;
  uint64_t end_unix_ns = 0;
  std::vector<std::pair<std::string, int64_t>> int_attributes;
  std::vector<std::pair<std::string, std::string>> string_attributes;
  std::string error;  // non-empty: status ERROR with this message
};

// Where finished spans go. Export must not block (drop instead).
class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual void Export(SpanRecord&& span) = 0;
};

namespace internal {
extern Exporter* g_exporter;
}  // namespace internal

// Turns tracing on (non-null) or off (null). `exporter` must outlive every span.
void SetExporter(Exporter* exporter);
inline bool Enabled() { return internal::g_exporter != nullptr; }

// Wall-clock time, ns since the Unix epoch (what OTLP wants).
uint64_t NowUnixNs();
// A steady_clock time point as Unix ns (offset from the current pair of clock readings).
uint64_t ToUnixNs(std::chrono::steady_clock::time_point t);

class Span {
 public:
  Span() = default;  // inactive: every method is a no-op
  Span(Span&&) noexcept = default;
  Span& operator=(Span&& other) noexcept;
  ~Span() { End(); }

  // A span of a new trace, or the child of `parent` when it is valid; inactive when tracing is
  // off or `parent` is valid but not sampled.
  static Span Start(std::string_view name, SpanKind kind, const SpanContext* parent);
  // The child of `parent`; inactive when `parent` is invalid (its request is not traced).
  static Span Child(std::string_view name, const SpanContext& parent,
                    SpanKind kind = SpanKind::kInternal);

  bool active() const { return record_ != nullptr; }
  // This span's context (invalid when inactive): the parent of its children.
  SpanContext context() const { return record_ ? record_->context : SpanContext{}; }
  void SetInt(std::string_view key, int64_t value);
  void SetString(std::string_view key, std::string_view value);
  void SetError(std::string_view message);
  // Ends the span and hands it to the exporter; later calls do nothing.
  void End();

 private:
  std::unique_ptr<SpanRecord> record_;
};

// A span measured elsewhere (start and end known), recorded at once as a child of `parent`;
// nothing when `parent` is invalid or tracing is off.
void RecordChild(std::string_view name, const SpanContext& parent, uint64_t start_unix_ns,
                 uint64_t end_unix_ns,
                 std::initializer_list<std::pair<const char*, int64_t>> int_attributes = {});

// The context of the request this thread works on (invalid if none or not traced).
const SpanContext& Current();
// Makes `ctx` this thread's Current() until destroyed (restores the previous one). A null `ctx`
// does nothing, so an untraced request pays nothing.
class ScopedContext {
 public:
  explicit ScopedContext(const SpanContext* ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool set_ = false;
  SpanContext saved_;
};

}  // namespace petal::trace
