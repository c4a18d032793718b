// Turns `petal serve --gpus all|N|LIST` into one CUDA_VISIBLE_DEVICES value per server replica.
// Each replica is a child process that sees exactly one GPU (as its device 0), so a crash or a
// memory leak on one GPU stays there. Thread-safety: pure function, no shared state.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace petal::cli {

// `spec` is "all", a count N (the first N devices), or a comma-separated list of device indices.
// `visible` is the number of devices this process sees; `parent_visible` is this process's own
// CUDA_VISIBLE_DEVICES ("" if unset): indices are positions in that list, so the values returned
// are the parent's entries (e.g. --gpus 1 under CUDA_VISIBLE_DEVICES=4,5 gives "5"). An empty
// result ("0") means: no GPU replicas, serve as without --gpus. FailedPrecondition when a GPU is
// asked for and none is visible; InvalidArgument for a malformed or out-of-range spec.
StatusOr<std::vector<std::string>> ResolveGpus(const std::string& spec, int visible,
                                               const std::string& parent_visible);

// The device index, in this process's numbering, of `entry` (one of ResolveGpus's values): its
// position in `parent_visible`, or the entry itself as a number when that is "". For replicas in
// this process (`--replica-transport local`), which cannot set CUDA_VISIBLE_DEVICES per replica.
StatusOr<int> DeviceIndexOf(const std::string& entry, const std::string& parent_visible);

}  // namespace petal::cli
