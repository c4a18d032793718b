// Entry point of the `petal` binary: dispatches to the registered subcommands.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "cli/command.h"

namespace petal::cli {
std::vector<CommandSpec>& CommandRegistry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace petal::cli

namespace {

// OpenMP (our CPU ops) and OpenBLAS (the GEMMs) keep separate thread pools. With libgomp's
// default active wait policy, idle OpenMP threads spin while OpenBLAS's threads work, and on a
// small machine the two pools fight for the cores (measured on 2 cores: 6.6 vs 18.9 texts/s for
// MiniLM). libgomp reads OMP_WAIT_POLICY when it loads, before main(), so if the user has not
// chosen a policy we set PASSIVE and re-execute ourselves once.
void EnsurePassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  EnsurePassiveOpenMpWait(argv);
  CLI::App app{"Petal: a serving stack for text-embedding models"};
  app.require_subcommand(1);
  auto& registry = petal::cli::CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> runners;
  for (auto& spec : registry) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.help);
    runners[sub] = spec.setup(sub);
  }
  CLI11_PARSE(app, argc, argv);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return 2;
}
