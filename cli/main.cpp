// ws1check: conformance checker for the WS1 numerical precision standard.
#include <fmt/core.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "commands.hpp"
#include "common.hpp"
#include "ws1/build_info.hpp"

namespace {

void setup_logging(int verbose, bool quiet) {
  auto logger = spdlog::stderr_color_mt("ws1check");
  logger->set_pattern("[%l] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(quiet ? spdlog::level::err
                          : verbose >= 2 ? spdlog::level::trace
                          : verbose == 1 ? spdlog::level::debug
                                         : spdlog::level::info);
}

std::string version_line() {
  const auto& b = ws1::build_info();
  return fmt::format("ws1check {} (source {} {}, {}, {}, cuda {})", b.version, b.source_commit,
                     b.source_state, b.compiler, b.build_type, b.cuda ? "yes" : "no");
}

}  // namespace

int main(int argc, char** argv) {
  ws1cli::set_cli_argv(argc, argv);
  CLI::App app{"ws1check: judges BF16 kernels against the WS1 precision standard"};
  app.require_subcommand(1);
  // Usage errors read like every other error: one "ws1check: error:" line, then the hint.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "ws1check: error: " + CLI::FailureMessage::simple(a, e);
  });
  app.set_version_flag("--version", version_line());
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "more log output on stderr (repeatable)");
  app.add_flag("-q,--quiet", quiet, "only errors on stderr");

  std::vector<ws1cli::Command> commands;
  commands.push_back(ws1cli::register_env(app));
  commands.push_back(ws1cli::register_fixtures(app));
  commands.push_back(ws1cli::register_accuracy(app));
  commands.push_back(ws1cli::register_invariance(app));
  commands.push_back(ws1cli::register_gate(app));
  commands.push_back(ws1cli::register_ops(app));
  commands.push_back(ws1cli::register_audit(app));
  commands.push_back(ws1cli::register_worker(app));
  commands.push_back(ws1cli::register_bench(app));
  commands.push_back(ws1cli::register_parity(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors are exit 2 (DESIGN §8); --help and --version are exit 0.
    int rc = app.exit(e);
    return rc == 0 ? 0 : ws1cli::exit_code(ws1::ExitCode::kBadInput);
  }
  setup_logging(verbose, quiet);
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.action();
  } catch (const ws1::EnvironmentFailure& e) {
    fmt::print(stderr, "ws1check: error: {}\n", e.what());
    return ws1cli::exit_code(ws1::ExitCode::kEnvironment);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ws1check: error: internal: {}\n", e.what());
    return ws1cli::exit_code(ws1::ExitCode::kEnvironment);
  }
  return ws1cli::exit_code(ws1::ExitCode::kBadInput);
}
