// Subcommand registry for the `petal` binary. Each cmd_*.cc file registers one subcommand with
// PETAL_REGISTER_COMMAND; main.cc builds the CLI11 app from the registry. Registration happens
// during static initialisation, before main; nothing here is touched afterwards.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace petal::cli {

struct CommandSpec {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `sub` and returns the function main() calls when the
  // subcommand is chosen; that function returns the process exit code.
  std::function<std::function<int()>(CLI::App* sub)> setup;
};

std::vector<CommandSpec>& CommandRegistry();

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSpec spec) { CommandRegistry().push_back(std::move(spec)); }
};

}  // namespace petal::cli

#define PETAL_REGISTER_COMMAND(ident, name, help, setup_fn) \
  static ::petal::cli::CommandRegistrar petal_cmd_##ident({name, help, setup_fn})
