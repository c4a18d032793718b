// Test helper for the CLI tests (cli_embed_prompt_test, cli_embed_query_test,
// cli_calibrate_test): runs a shell command and collects what it prints. Thread-safety: test-only.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace petal::testing {

// Runs `cmd` under /bin/sh; returns its exit status (-1 if it did not exit normally) and puts its
// stdout, and its stderr too when `with_stderr`, in *out.
inline int RunShell(const std::string& cmd, std::string* out, bool with_stderr = false) {
  out->clear();
  FILE* p = popen((with_stderr ? cmd + " 2>&1" : cmd).c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace petal::testing
