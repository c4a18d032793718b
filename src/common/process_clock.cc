#include "common/process_clock.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace petal {

double ProcessAgeSeconds() {
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command name (which may hold spaces, so parse from its closing ')'):
  // state is field 3, starttime (clock ticks after boot) field 22.
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  ++p;
  for (int field = 3; field < 22 && p; ++field) {
    while (*p == ' ') ++p;
    p = std::strchr(p, ' ');
  }
  if (!p) return 0;
  const unsigned long long start = std::strtoull(p, nullptr, 10);
  const long ticks = sysconf(_SC_CLK_TCK);
  timespec now{};
  if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
  const double age = static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9 -
                     static_cast<double>(start) / static_cast<double>(ticks);
  return age > 0 ? age : 0;
}

}  // namespace petal
