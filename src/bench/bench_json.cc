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
