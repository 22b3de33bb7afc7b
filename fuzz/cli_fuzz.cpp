// Fuzz target: ws1check's command line. The input is argv[1..] separated by NUL bytes; it is
// parsed by the app that ws1cli::build_cli builds for main(), and no command is run. A usage
// error (CLI::ParseError, --help and --version included) is the parser's answer; any other
// exception out of the parse would end ws1check unhandled and is a finding.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"ws1check"};
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) args.push_back(std::move(current));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());

  // An app serves kInputsPerApp inputs, its parse state cleared before each (CLI11's App::clear,
  // made for parsing again), then is built anew: building it is most of an input's time, the
  // parse under test does not read the option variables a previous parse left set, and the
  // memory a long-lived app gathers across parses stays bounded.
  constexpr int kInputsPerApp = 1000;
  struct Cli {
    CLI::App app;
    ws1cli::GlobalOptions global;
    std::vector<ws1cli::Command> commands = ws1cli::build_cli(app, global);
  };
  static std::unique_ptr<Cli> cli;
  static int served = 0;
  if (!cli || served++ % kInputsPerApp == 0) {
    cli.reset();
    cli = std::make_unique<Cli>();
  }
  cli->app.clear();
  try {
    cli->app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;
  }
  // Which command main() would run; it is not run.
  for (const ws1cli::Command& c : cli->commands)
    if (c.app->parsed()) break;
  return 0;
}
