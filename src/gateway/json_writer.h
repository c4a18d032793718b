// Hand-written JSON output for the gateway's responses. Embeddings dominate response size, so
// floats go straight into one std::string with std::to_chars (shortest text that round-trips to
// the same float32), with no intermediate DOM. Thread-safety: a JsonOut is used by one thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace petal::gateway {

class JsonOut {
 public:
  // Starts from a recycled buffer (wire/recycled.h; the HTTP server gives response bodies back
  // once written), reserved to `reserve` bytes.
  explicit JsonOut(size_t reserve = 256);
  // Appends raw text (the caller guarantees it is valid JSON in context).
  JsonOut& Raw(std::string_view text) {
    s_.append(text);
    return *this;
  }
  // Appends a quoted, escaped string.
  JsonOut& Str(std::string_view text);
  JsonOut& Int(int64_t v);
  // Shortest round-trip float32; non-finite values (which JSON cannot hold) become null.
  JsonOut& Float(float v);
  JsonOut& Double(double v);
  // `[f0,f1,...]`.
  JsonOut& FloatArray(std::span<const float> v);
  // A quoted base64 (RFC 4648, padded) string of `bytes`.
  JsonOut& Base64(std::string_view bytes);

  std::string& str() { return s_; }
  std::string Take() { return std::move(s_); }

 private:
  std::string s_;
};

// `{"error":{"message":...,"type":...,"param":...}}` (param null when empty), OpenAI's shape.
std::string ErrorJson(std::string_view message, std::string_view type, std::string_view param);

}  // namespace petal::gateway
