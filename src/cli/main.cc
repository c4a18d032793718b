// Entry point of the `petal` binary: dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/command.h"

namespace petal::cli {
std::vector<CommandSpec>& CommandRegistry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace petal::cli

int main(int argc, char** argv) {
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
