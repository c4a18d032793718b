// The Parquet helper (dataset_arrow.py, embedded in the binary) as a child process talking over
// pipes, plus the exact-length pipe reads and writes both dataset readers and writers use.
// Thread-safety: a ChildProcess belongs to one thread at a time.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace petal::bulk {

// Writes all n bytes (retrying short writes and EINTR).
Status WriteAll(int fd, const void* data, size_t n);
// Reads exactly n bytes; false at a clean end of stream before the first byte.
StatusOr<bool> ReadAll(int fd, void* data, size_t n);

class ChildProcess {
 public:
  ~ChildProcess();
  // Runs `PythonExe() -c <dataset_arrow.py> args...` with its stdout (and, if pipe_in, stdin)
  // piped to this process.
  Status Start(const std::vector<std::string>& args, bool pipe_in);
  // Closes its stdin and waits for it to exit: an error naming the helper if it failed.
  Status Finish();
  // One line of its stdout, without the '\n'.
  Status ReadLine(std::string* line);
  int in() const { return in_; }
  int out() const { return out_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

}  // namespace petal::bulk
