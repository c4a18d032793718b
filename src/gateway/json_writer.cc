#include "gateway/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "wire/recycled.h"

namespace petal::gateway {

JsonOut& JsonOut::Str(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  s_.push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        s_.append("\\\"");
        break;
      case '\\':
        s_.append("\\\\");
        break;
      case '\n':
        s_.append("\\n");
        break;
      case '\r':
        s_.append("\\r");
        break;
      case '\t':
        s_.append("\\t");
        break;
      default:
        if (c < 0x20) {
          s_.append("\\u00");
          s_.push_back(kHex[c >> 4]);
          s_.push_back(kHex[c & 15]);
        } else {
          s_.push_back(static_cast<char>(c));
        }
    }
  }
  s_.push_back('"');
  return *this;
}

JsonOut& JsonOut::Int(int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  s_.append(buf, r.ptr);
  return *this;
}

JsonOut& JsonOut::Float(float v) {
  if (!std::isfinite(v)) return Raw("null");
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  s_.append(buf, r.ptr);
  return *this;
}

JsonOut& JsonOut::Double(double v) {
  if (!std::isfinite(v)) return Raw("null");
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  s_.append(buf, r.ptr);
  return *this;
}

JsonOut::JsonOut(size_t reserve) : s_(wire::TakeByteBuffer()) { s_.reserve(reserve); }

JsonOut& JsonOut::FloatArray(std::span<const float> v) {
  // Written in place: the string grows once to the worst case (a float32's shortest form is at
  // most 15 characters, "-1.17549435e-38"; plus a comma), then shrinks to what was written. No
  // per-float temporary or append; ~12% faster than appending, the resize's zero fill included
  // (bench/results/2026-12-06-session16/float_format.txt).
  constexpr size_t kMaxPerFloat = 16;
  const size_t start = s_.size();
  s_.resize(start + v.size() * kMaxPerFloat + 2);
  char* p = s_.data() + start;
  char* const end = s_.data() + s_.size();
  *p++ = '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) *p++ = ',';
    if (std::isfinite(v[i])) {
      p = std::to_chars(p, end, v[i]).ptr;
    } else {
      std::memcpy(p, "null", 4);
      p += 4;
    }
  }
  *p++ = ']';
  s_.resize(static_cast<size_t>(p - s_.data()));
  return *this;
}

JsonOut& JsonOut::Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  s_.reserve(s_.size() + (n + 2) / 3 * 4 + 2);
  s_.push_back('"');
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    s_.push_back(kAlphabet[v >> 18]);
    s_.push_back(kAlphabet[(v >> 12) & 63]);
    s_.push_back(kAlphabet[(v >> 6) & 63]);
    s_.push_back(kAlphabet[v & 63]);
  }
  if (n - i == 1) {
    const uint32_t v = p[i] << 16;
    s_.push_back(kAlphabet[v >> 18]);
    s_.push_back(kAlphabet[(v >> 12) & 63]);
    s_.append("==");
  } else if (n - i == 2) {
    const uint32_t v = (p[i] << 16) | (p[i + 1] << 8);
    s_.push_back(kAlphabet[v >> 18]);
    s_.push_back(kAlphabet[(v >> 12) & 63]);
    s_.push_back(kAlphabet[(v >> 6) & 63]);
    s_.push_back('=');
  }
  s_.push_back('"');
  return *this;
}

std::string ErrorJson(std::string_view message, std::string_view type, std::string_view param) {
  JsonOut o;
  o.Raw("{\"error\":{\"message\":").Str(message).Raw(",\"type\":").Str(type).Raw(",\"param\":");
  if (param.empty()) {
    o.Raw("null");
  } else {
    o.Str(param);
  }
  o.Raw("}}");
  return o.Take();
}

}  // namespace petal::gateway
