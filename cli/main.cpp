// ws1check: conformance checker for the WS1 numerical precision standard.
#include <fmt/core.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "commands.hpp"
#include "common.hpp"
#include "ws1_build_config.h"
#if WS1_HAVE_CUDA
#include "ws1cuda/cuda_backend.hpp"
#endif

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

}  // namespace

int main(int argc, char** argv) {
  ws1cli::set_cli_argv(argc, argv);
  CLI::App app;
  ws1cli::GlobalOptions global;
  std::vector<ws1cli::Command> commands = ws1cli::build_cli(app, global);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors are exit 2 (DESIGN §8); --help and --version are exit 0.
    int rc = app.exit(e);
    return rc == 0 ? 0 : ws1cli::exit_code(ws1::ExitCode::kBadInput);
  }
  setup_logging(global.verbose, global.quiet);
#if WS1_HAVE_CUDA
  ws1cuda::register_engines();  // cuda_bf16 and cuda_fp32 join lib's registry (ws1/backend.hpp)
#endif
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
