// What every subcommand shares: the command line, default file locations, error reporting, exit
// codes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ws1/error.hpp"

namespace CLI {
class App;
}

namespace ws1cli {

struct Command;  // commands.hpp

// A shipped data file (contracts/..., fixtures/...), as ws1::shipped_path finds it
// ($WS1CHECK_DATA_DIR, an installed <exe>/../share/ws1check, the source tree).
std::filesystem::path shipped_file(const std::string& relative);
std::string default_contract();
std::string default_workload();

// The command line as given (for the evidence), recorded by main().
void set_cli_argv(int argc, char** argv);
const std::vector<std::string>& cli_argv();

// The flags of ws1check itself, before the subcommand.
struct GlobalOptions {
  int verbose = 0;     // -v, repeatable
  bool quiet = false;  // -q
};

// Builds the whole command line on `app`: description, --version, the global flags and every
// subcommand with its options, bound to `global` and to each command's own options. Parsing
// `app` then only fills those in; it runs nothing: the returned commands' actions do.
std::vector<Command> build_cli(CLI::App& app, GlobalOptions& global);

// Prints the error as one line on stderr and returns its exit code.
int report(const ws1::Error& error);
int exit_code(ws1::ExitCode code);

}  // namespace ws1cli
