// The resumable state of `petal embed --input`: OUTPUT.parts/manifest.json lists the finished
// parts (file, first input row, rows, written, skipped) under the run's options, and a
// PartCommitter makes parts durable and records them on a thread of its own, in order, so the
// rows of later parts keep flowing while one is fsynced. Thread-safety: Save/LoadManifest are
// plain functions; a PartCommitter is driven by one thread (its worker is internal).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bulk/dataset_write.h"
#include "common/status.h"

namespace petal::bulk {

struct Part {
  std::string file;
  int64_t first_row = 0, rows = 0, written = 0, skipped = 0;
};

// Writes DIR/manifest.json (through a .tmp, fsync and rename) with `config` and `parts`.
Status SaveManifest(const std::string& dir, const std::string& config,
                    const std::vector<Part>& parts);
// The parts of DIR/manifest.json; an error if it was made with another `config` or a part file
// is missing.
StatusOr<std::vector<Part>> LoadManifest(const std::string& dir, const std::string& config);

// Removes DIR once the output is complete: the manifest first (DIR is then no run to resume),
// then the rest. Errors are ignored: what is left is garbage, not state. (Freeing the 1.5 GB of
// parts of a 1M-row run takes 0.3-0.5 s on the H200 machine, several files at a time too.)
void RemoveParts(const std::string& dir);

class PartCommitter {
 public:
  // `parts`: those already in the manifest.
  PartCommitter(std::string dir, std::string config, std::vector<Part> parts);
  ~PartCommitter();
  // Queues `file` (written, not yet closed) for Close() and then the manifest, after every
  // part queued before it. Returns an earlier commit's error, if any.
  Status Commit(std::unique_ptr<PartFile> file, Part part);
  // Waits for every queued part; the first error, if any.
  Status Wait();

 private:
  void Loop();
  const std::string dir_, config_;
  std::vector<Part> parts_;  // worker-only once started
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::unique_ptr<PartFile>, Part>> queue_;
  bool busy_ = false, stop_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace petal::bulk
