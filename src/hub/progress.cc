// Download progress on stderr (see progress.h).
#include "hub/progress.h"

#include <unistd.h>

namespace petal::hub {
namespace {
// Without a terminal: files from 1 MB get a start line, from 10 MB a line per quarter; every
// file gets its end line.
constexpr int64_t kAnnounceBytes = 1000 * 1000;
constexpr int64_t kQuarterBytes = 10 * 1000 * 1000;
}  // namespace

Progress::Progress(std::string label, int64_t total, bool enabled, std::FILE* out)
    : label_(std::move(label)),
      total_(total),
      enabled_(enabled),
      tty_(enabled && isatty(fileno(out))),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (enabled_ && !tty_ && (total_ < 0 || total_ >= kAnnounceBytes)) {
    std::fprintf(out_, "hub: downloading %s (%s)\n", label_.c_str(),
                 total_ >= 0 ? Bytes(total_).c_str() : "size unknown");
  }
}

std::string Progress::Bytes(int64_t n) {
  char buf[32];
  const double v = static_cast<double>(n);
  if (n < 1000) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  } else if (n < 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f kB", v / 1e3);
  } else if (n < 1000LL * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", v / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB", v / 1e9);
  }
  return buf;
}

void Progress::Update(int64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (start_bytes_ < 0) start_bytes_ = done;
  if (tty_) {
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    drawn_ = true;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done - start_bytes_) / secs : 0;
    if (total_ > 0) {
      const int pct = static_cast<int>(100.0 * static_cast<double>(done) / total_);
      const int filled = pct / 5;
      std::fprintf(out_, "\r%s [%.*s%*s] %3d%% %s/%s %s/s\033[K", label_.c_str(), filled,
                   "####################", 20 - filled, "", pct, Bytes(done).c_str(),
                   Bytes(total_).c_str(), Bytes(static_cast<int64_t>(rate)).c_str());
    } else {
      std::fprintf(out_, "\r%s %s %s/s\033[K", label_.c_str(), Bytes(done).c_str(),
                   Bytes(static_cast<int64_t>(rate)).c_str());
    }
    std::fflush(out_);
    return;
  }
  if (total_ < kQuarterBytes) return;
  while (next_quarter_ < 4 && done * 4 >= total_ * next_quarter_) {
    std::fprintf(out_, "hub: %s %d%% (%s of %s)\n", label_.c_str(), 25 * next_quarter_,
                 Bytes(done).c_str(), Bytes(total_).c_str());
    ++next_quarter_;
  }
}

void Progress::Finish(const std::string& note) {
  if (!enabled_) return;
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "hub: %s (%s) done in %.1f s%s%s\n", label_.c_str(),
               total_ >= 0 ? Bytes(total_).c_str() : "?", secs, note.empty() ? "" : ", ",
               note.c_str());
  std::fflush(out_);
}

}  // namespace petal::hub
