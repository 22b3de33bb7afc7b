// What every subcommand shares: default file locations, error reporting, exit codes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ws1/error.hpp"

namespace ws1cli {

// A shipped data file (contracts/..., fixtures/...), as ws1::shipped_path finds it
// ($WS1CHECK_DATA_DIR, an installed <exe>/../share/ws1check, the source tree).
std::filesystem::path shipped_file(const std::string& relative);
std::string default_contract();
std::string default_workload();

// The command line as given (for the evidence), recorded by main().
void set_cli_argv(int argc, char** argv);
const std::vector<std::string>& cli_argv();

// Prints the error as one line on stderr and returns its exit code.
int report(const ws1::Error& error);
int exit_code(ws1::ExitCode code);

}  // namespace ws1cli
