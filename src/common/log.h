// Structured one-line logs (logfmt: ts=... level=... msg="..." key=value) on stderr, shared by
// server, gateway and CLI. Thread-safety: each call writes one line with a single fprintf, so
// lines from several threads do not interleave.
#pragma once

#include <chrono>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <string>
#include <utility>

namespace petal {

using LogFields = std::initializer_list<std::pair<const char*, std::string>>;

inline void Log(const char* level, const std::string& msg, LogFields fields = {}) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = std::string("ts=") + ts + "." + std::to_string(1000 + ms).substr(1) +
                     "Z level=" + level + " msg=\"" + msg + "\"";
  for (const auto& [k, v] : fields) {
    const bool quote = v.empty() || v.find_first_of(" \"=") != std::string::npos;
    line += std::string(" ") + k + "=" + (quote ? "\"" + v + "\"" : v);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace petal
