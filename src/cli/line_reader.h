// Reading a file descriptor line by line without blocking when asked not to (`petal embed`'s
// stdin batcher: more queued input joins the batch, a lone interactive line is answered at once).
// Thread-safety: one reader per thread.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <string>

namespace petal::cli {

// Splits a file descriptor into lines. Next() with wait=false returns only a line that can be
// had without blocking, which is how the batcher tells "more input is queued" from "the writer
// is waiting for our answer".
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // Sets *line (without '\n') and returns true, or returns false at end of input or, when
  // !wait, if no complete line is available yet.
  bool Next(std::string* line, bool wait) {
    for (;;) {
      const size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        line->assign(buf_, pos_, nl - pos_);
        pos_ = nl + 1;
        return true;
      }
      if (eof_) {
        if (pos_ >= buf_.size()) return false;
        line->assign(buf_, pos_, std::string::npos);
        pos_ = buf_.size();
        return true;
      }
      if (!wait) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) return false;
      }
      buf_.erase(0, pos_);
      pos_ = 0;
      char chunk[1 << 16];
      const ssize_t n = read(fd_, chunk, sizeof(chunk));
      if (n <= 0) {
        eof_ = true;
      } else {
        buf_.append(chunk, static_cast<size_t>(n));
      }
    }
  }

 private:
  int fd_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

}  // namespace petal::cli
