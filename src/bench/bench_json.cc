#include "bench/bench_json.h"

#include <cstdio>
#include <fstream>

namespace petal::bench {

std::string LatencyJsonFields(const LatencyStats& st) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f,\"mean_ms\":%.4f,"
                "\"n\":%d",
                st.p50, st.p90, st.p99, st.max, st.mean, st.n);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

int WriteResultFile(const std::string& path, const std::string& text, bool quiet) {
  if (path.empty()) return 0;
  std::ofstream f(path);
  f << text;
  if (!f) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    return 1;
  }
  if (!quiet) std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace petal::bench
