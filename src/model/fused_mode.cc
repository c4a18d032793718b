// ParseFusedMode and FusedModeFromEnv (fused_mode.h).
#include "model/fused_mode.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace petal {

int ParseFusedMode(const char* value, int fallback) {
  if (value == nullptr) return fallback;
  if (std::strcmp(value, "auto") == 0) return kFusedAuto;
  const bool timed = std::strncmp(value, "auto:", 5) == 0;
  const char* digits = timed ? value + 5 : value;
  if (!std::isdigit(static_cast<unsigned char>(digits[0]))) return 0;
  char* end = nullptr;
  const long n = std::strtol(digits, &end, 10);
  if (*end != '\0') return 0;
  const int from = n > (1 << 30) ? (1 << 30) : static_cast<int>(n);
  if (!timed) return from;
  return from > 1 ? -from : kFusedAuto;
}

int FusedModeFromEnv(const char* name, int fallback) {
  return ParseFusedMode(std::getenv(name), fallback);
}

}  // namespace petal
