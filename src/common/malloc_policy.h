// How a serving process sets glibc's malloc. glibc raises its mmap threshold each time it frees
// a large mmapped block (up to 32 MiB); from then on large request buffers (bodies, token ids,
// responses of a few hundred KiB to MiBs) come from the heap, and after a burst of big requests
// the heap keeps most of the pages they used (fragmented between live blocks). A fixed threshold
// of 256 KiB keeps such blocks mmapped, so they go back to the system when freed
// (bench/results/2026-12-07-session22/: RSS after bursts ~50 MB instead of 100-180 MB).
// Not applied in a process that runs the CPU engine: its per-forward buffers above the threshold
// would then be mapped and faulted in on every call.
// Thread-safety: call ApplyServingMallocPolicy once, before serving; NoteCpuEngine from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace petal {

// The threshold to set, or 0 to leave glibc's dynamic one: `petal_env` is PETAL_MMAP_THRESHOLD
// (bytes; 0 = leave it), `glibc_env` MALLOC_MMAP_THRESHOLD_ (glibc has applied it: leave it).
size_t ServingMmapThreshold(const char* petal_env, const char* glibc_env, bool cpu_engine);

// Records that this process runs a CPU engine (the policy is then not applied).
void NoteCpuEngine();

// Sets the threshold ServingMmapThreshold gives for this process's environment. `line` says what
// was done, for the log; `ok` is false when PETAL_MMAP_THRESHOLD was not understood or mallopt
// refused (log it as a warning).
struct MallocPolicyResult {
  bool ok = true;
  std::string line;
};
MallocPolicyResult ApplyServingMallocPolicy();

// ApplyServingMallocPolicy, then one log line (info, or warn when !ok).
void ApplyServingMallocPolicyAndLog();

}  // namespace petal
