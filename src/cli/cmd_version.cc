// `petal version`: prints the version and the backends compiled in.
#include <cstdio>

#include "cli/command.h"

namespace {
std::function<int()> SetupVersion(CLI::App*) {
  return [] {
#ifdef PETAL_WITH_CUDA
    std::printf("petal 0.1.0 (backends: cpu, cuda)\n");
#else
    std::printf("petal 0.1.0 (backends: cpu)\n");
#endif
    return 0;
  };
}
}  // namespace

PETAL_REGISTER_COMMAND(version, "version", "Print the version and compiled-in backends",
                       SetupVersion);
