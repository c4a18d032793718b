// Sizing and pinning the CPU engine's OpenMP threads: as many threads as CPUs this process may
// run on (sched_getaffinity), unless OMP_NUM_THREADS or an explicit count says otherwise, each
// pinned to one of those CPUs (PETAL_CPU_PIN=0, or OMP_PROC_BIND set, leaves placement to the OS).
// Thread-safety: ConfigureCpuThreads() changes process-wide OpenMP state; call it at start-up.
#pragma once

#include <string>
#include <vector>

namespace petal::cpu {

// The CPUs in this process's affinity mask at first call, ascending.
std::vector<int> UsableCpus();

// The thread count to use: `threads` if > 0, else OMP_NUM_THREADS if set, else the usable CPUs.
int ResolveCpuThreads(int threads);

// Sets the OpenMP thread count on the calling thread (OpenMP keeps it per thread) and the
// OpenBLAS count (the reference path's BLAS); returns a line for logs, e.g.
// "2 OpenMP threads, pinned to one CPU each".
std::string ConfigureCpuThreads(int threads);

// For the thread about to run a forward: sets its OpenMP thread count to `threads` and pins its
// team once (PinCpuThreadsOnce). Cheap after the first call on a thread.
void EnterCpuThreads(int threads);

// Whether PinCpuThreadsOnce() pins: not with PETAL_CPU_PIN=0, OMP_PROC_BIND set, or more threads
// than usable CPUs.
bool PinningAllowed(int threads);

// The first time on each calling thread: pins the workers of that thread's OpenMP team, worker i
// to the i-th usable CPU (i >= 1; the calling thread stays unpinned, as threads it starts later
// inherit its mask). Call it from the thread that runs the engine's steps.
void PinCpuThreadsOnce();

}  // namespace petal::cpu
