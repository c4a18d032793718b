#include "bulk/dataset_child.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bulk/dataset_io.h"
#include "dataset_arrow.h"  // generated: kDatasetArrowPy, the helper's source

extern char** environ;

namespace petal::bulk {

Status WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Internal(std::string("write: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

StatusOr<bool> ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Internal(std::string("read: ") + std::strerror(errno));
    if (r == 0) {
      if (got == 0) return false;
      return DataLoss("the Parquet helper's stream ended mid-frame");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

ChildProcess::~ChildProcess() {
  if (in_ >= 0) close(in_);
  if (out_ >= 0) close(out_);
  if (pid_ > 0) {
    int st;
    waitpid(pid_, &st, 0);
  }
}

Status ChildProcess::Start(const std::vector<std::string>& args, bool pipe_in) {
  std::vector<std::string> argv = {PythonExe(), "-c", kDatasetArrowPy};
  argv.insert(argv.end(), args.begin(), args.end());
  int to_child[2] = {-1, -1}, from_child[2];
  if (pipe(from_child) != 0 || (pipe_in && pipe(to_child) != 0)) return Internal("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, from_child[0]);
  if (pipe_in) {
    posix_spawn_file_actions_adddup2(&fa, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, argv[0].c_str(), &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(from_child[1]);
  out_ = from_child[0];
  if (pipe_in) {
    close(to_child[0]);
    in_ = to_child[1];
  }
  if (rc != 0) {
    pid_ = -1;
    return FailedPrecondition("cannot run " + argv[0] + " for Parquet (set PETAL_PYTHON to " +
                              "a Python with pyarrow): " + std::strerror(rc));
  }
  return Status::Ok();
}

Status ChildProcess::Finish() {
  if (in_ >= 0) close(in_);
  in_ = -1;
  int st = 0;
  if (pid_ > 0 && waitpid(pid_, &st, 0) == pid_) {
    pid_ = -1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      return Internal("the Parquet helper (" + PythonExe() + " with pyarrow) failed; see above");
    }
  }
  pid_ = -1;
  return Status::Ok();
}

Status ChildProcess::ReadLine(std::string* line) {
  line->clear();
  char c;
  for (;;) {
    PETAL_ASSIGN_OR_RETURN(bool more, ReadAll(out_, &c, 1));
    if (!more) {
      Status st = Finish();
      return st.ok() ? DataLoss("the Parquet helper stopped") : st;
    }
    if (c == '\n') return Status::Ok();
    line->push_back(c);
  }
}

}  // namespace petal::bulk
