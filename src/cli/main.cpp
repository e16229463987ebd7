// densa: one binary, many subcommands (architecture.md). Each subcommand lives in its own
// cli/cmd_*.cpp and registers itself.
#include <cstdio>

#include "cli/command.h"
#include "cli/version.h"

namespace densa::cli {

std::vector<CommandSetup>& command_setups() {
  static std::vector<CommandSetup> setups;
  return setups;
}

CommandRegistrar::CommandRegistrar(CommandSetup setup) { command_setups().push_back(std::move(setup)); }

}  // namespace densa::cli

int main(int argc, char** argv) {
  CLI::App app{"densa: a dense-memory inference server for Mixture-of-Experts models"};
  app.set_version_flag("--version", [] { return densa::cli::version_text(); },
                       "print the version, the commit and the kernels this machine will run, and exit");
  app.require_subcommand(1);
  for (auto& setup : densa::cli::command_setups()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
