#pragma once
// Subcommands register themselves: each cli/cmd_*.cpp defines one static CommandRegistrar
// whose setup function adds its CLI11 subcommand. cli/ is compiled into the executable
// directly (not a static library), so every registrar runs.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace densa::cli {

using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSetup setup);
};

std::vector<CommandSetup>& command_setups();

}  // namespace densa::cli

// A command that fails prints one line to stderr and throws CLI::RuntimeError(exit_code);
// main() turns that into the process exit status.
