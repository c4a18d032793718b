// Download progress on stderr: on a terminal, one line redrawn in place (file, bytes, percent,
// rate) at most ten times a second; otherwise (logs, CI) a line at the end of each file, plus
// one at the start from 1 MB and one per quarter from 10 MB. Thread-safety: one Progress per
// download, used from the downloading thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace petal::hub {

class Progress {
 public:
  // `label` names the file ("ORG/NAME model.safetensors"); `total` in bytes (-1: unknown).
  Progress(std::string label, int64_t total, bool enabled, std::FILE* out = stderr);
  // Bytes on disk so far (including what a resumed download already had).
  void Update(int64_t done);
  // Ends the bar; `note` is appended ("sha256 verified").
  void Finish(const std::string& note);

  // "1.5 MB" style sizes (decimal units, as huggingface_hub prints them).
  static std::string Bytes(int64_t n);

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool tty_;
  std::FILE* out_;
  int64_t start_bytes_ = -1;
  int next_quarter_ = 1;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

}  // namespace petal::hub
