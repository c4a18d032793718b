// Reading numeric switches from the environment (PETAL_* tuning knobs). Thread-safety: reads the
// environment with std::getenv; do not call while another thread modifies it.
#pragma once

#include <cstdlib>
#include <optional>

namespace petal {

// The variable `name` as a non-negative decimal integer; nullopt when it is unset, empty, or not
// such a number (trailing characters included), so a typo leaves the caller's default in force.
inline std::optional<long long> EnvNonNegative(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < 0) return std::nullopt;
  return x;
}

}  // namespace petal
