#include "kernels/cpu/cpu_threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int num_threads);

namespace petal::cpu {

std::vector<int> UsableCpus() {
  // Read once, before any pinning narrows the calling thread's own mask.
  static const std::vector<int> cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
      }
    }
    if (cpus.empty()) cpus.push_back(0);
    return cpus;
  }();
  return cpus;
}

int ResolveCpuThreads(int threads) {
  if (threads > 0) return threads;
  const char* env = std::getenv("OMP_NUM_THREADS");
  return env && std::atoi(env) > 0 ? std::atoi(env) : static_cast<int>(UsableCpus().size());
}

void EnterCpuThreads(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  PinCpuThreadsOnce();
}

std::string ConfigureCpuThreads(int threads) {
  threads = ResolveCpuThreads(threads);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  std::string line = std::to_string(threads) + " OpenMP threads";
  return line + (PinningAllowed(threads) ? ", pinned to one CPU each" : ", not pinned");
}

bool PinningAllowed(int threads) {
  const char* pin_env = std::getenv("PETAL_CPU_PIN");
  return !(pin_env && std::string(pin_env) == "0") && !std::getenv("OMP_PROC_BIND") &&
         threads <= static_cast<int>(UsableCpus().size());
}

void PinCpuThreadsOnce() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  const int threads = omp_get_max_threads();
  if (!PinningAllowed(threads)) return;
  const std::vector<int> cpus = UsableCpus();
  // Worker i of this thread's pool to the i-th usable CPU; libgomp keeps a master thread's team
  // across parallel regions, so this holds for the engine's later regions. The calling thread
  // itself stays unpinned: threads it starts later inherit its mask, which must stay whole.
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() > 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[omp_get_thread_num()], &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    }
  }
}

}  // namespace petal::cpu
