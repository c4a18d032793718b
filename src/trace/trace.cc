#include "trace/trace.h"

#include <random>

namespace petal::trace {
namespace internal {
Exporter* g_exporter = nullptr;
}  // namespace internal

namespace {

thread_local SpanContext t_current;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // W3C: lower-case hex only
}

bool ParseHex(std::string_view s, uint8_t* out) {
  for (size_t i = 0; i < s.size() / 2; ++i) {
    const int hi = HexDigit(s[2 * i]), lo = HexDigit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& a) {
  for (uint8_t b : a) {
    if (b != 0) return false;
  }
  return true;
}

// Random non-zero ids; one generator per thread, seeded from the OS.
template <size_t N>
void RandomId(std::array<uint8_t, N>* id) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<uint64_t>(std::random_device{}()) << 32)};
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t v = rng();
      for (size_t j = 0; j < 8 && i + j < N; ++j) (*id)[i + j] = static_cast<uint8_t>(v >> (8 * j));
    }
  } while (AllZero(*id));
}

}  // namespace

bool SpanContext::valid() const { return !AllZero(trace_id) && !AllZero(span_id); }

std::optional<SpanContext> ParseTraceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" flags; a future version may append "-..." fields.
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  uint8_t version = 0;
  if (!ParseHex(v.substr(0, 2), &version) || version == 0xff) return std::nullopt;
  if (version == 0 && v.size() != 55) return std::nullopt;
  if (v.size() > 55 && v[55] != '-') return std::nullopt;
  SpanContext c;
  if (!ParseHex(v.substr(3, 32), c.trace_id.data()) ||
      !ParseHex(v.substr(36, 16), c.span_id.data()) || !ParseHex(v.substr(53, 2), &c.flags)) {
    return std::nullopt;
  }
  if (!c.valid()) return std::nullopt;
  return c;
}

std::string Hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

std::string FormatTraceparent(const SpanContext& c) {
  return "00-" + Hex(c.trace_id.data(), 16) + "-" + Hex(c.span_id.data(), 8) + "-" +
         Hex(&c.flags, 1);
}

void SetExporter(Exporter* exporter) { internal::g_exporter = exporter; }

uint64_t NowUnixNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

uint64_t ToUnixNs(std::chrono::steady_clock::time_point t) {
  const auto ago = std::chrono::steady_clock::now() - t;
  return NowUnixNs() -
         static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(ago).count());
}

Span& Span::operator=(Span&& other) noexcept {
  if (this != &other) {
    End();
    record_ = std::move(other.record_);
  }
  return *this;
}

Span Span::Start(std::string_view name, SpanKind kind, const SpanContext* parent) {
  Span s;
  if (!Enabled()) return s;
  if (parent != nullptr && parent->valid() && !parent->sampled()) return s;
  s.record_ = std::make_unique<SpanRecord>();
  SpanRecord& r = *s.record_;
  if (parent != nullptr && parent->valid()) {
    r.context.trace_id = parent->trace_id;
    r.parent_span_id = parent->span_id;
  } else {
    RandomId(&r.context.trace_id);
  }
  RandomId(&r.context.span_id);
  r.context.flags = 1;
  r.name = name;
  r.kind = kind;
  r.start_unix_ns = NowUnixNs();
  return s;
}

Span Span::Child(std::string_view name, const SpanContext& parent, SpanKind kind) {
  if (!parent.valid()) return Span();
  return Start(name, kind, &parent);
}

void Span::SetInt(std::string_view key, int64_t value) {
  if (record_) record_->int_attributes.emplace_back(std::string(key), value);
}

void Span::SetString(std::string_view key, std::string_view value) {
  if (record_) record_->string_attributes.emplace_back(std::string(key), std::string(value));
}

void Span::SetError(std::string_view message) {
  if (record_) record_->error = message.empty() ? "error" : std::string(message);
}

void Span::End() {
  if (!record_) return;
  record_->end_unix_ns = NowUnixNs();
  std::unique_ptr<SpanRecord> r = std::move(record_);
  if (Exporter* e = internal::g_exporter) e->Export(std::move(*r));
}

void RecordChild(std::string_view name, const SpanContext& parent, uint64_t start_unix_ns,
                 uint64_t end_unix_ns,
                 std::initializer_list<std::pair<const char*, int64_t>> int_attributes) {
  Exporter* e = internal::g_exporter;
  if (e == nullptr || !parent.valid() || !parent.sampled()) return;
  SpanRecord r;
  r.context.trace_id = parent.trace_id;
  RandomId(&r.context.span_id);
  r.context.flags = 1;
  r.parent_span_id = parent.span_id;
  r.name = name;
  r.start_unix_ns = start_unix_ns;
  r.end_unix_ns = end_unix_ns;
  for (const auto& [k, v] : int_attributes) r.int_attributes.emplace_back(k, v);
  e->Export(std::move(r));
}

const SpanContext& Current() { return t_current; }

ScopedContext::ScopedContext(const SpanContext* ctx) {
  if (ctx == nullptr) return;
  saved_ = t_current;
  t_current = *ctx;
  set_ = true;
}

ScopedContext::~ScopedContext() {
  if (set_) t_current = saved_;
}

}  // namespace petal::trace
