#include "common.hpp"

#include <cstdint>
#include <string>

#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "ws1/build_info.hpp"

namespace ws1cli {
namespace fs = std::filesystem;

fs::path shipped_file(const std::string& relative) { return ws1::shipped_path(relative); }

std::string default_contract() { return shipped_file("contracts/ws1-c1-v2.json").string(); }
std::string default_workload() {
  return shipped_file("fixtures/ws1-qwen3-8b-dense.json").string();
}

namespace {
constexpr std::int64_t kMaxFlagCount = 1000;  // per value of a counting flag (-v)

std::vector<std::string>& argv_store() {
  static std::vector<std::string> argv;
  return argv;
}

std::string version_line() {
  const auto& b = ws1::build_info();
  return fmt::format("ws1check {} (source {} {}, {}, {}, cuda {})", b.version, b.source_commit,
                     b.source_state, b.compiler, b.build_type, b.cuda ? "yes" : "no");
}
}  // namespace

void set_cli_argv(int argc, char** argv) { argv_store().assign(argv, argv + argc); }
const std::vector<std::string>& cli_argv() { return argv_store(); }

std::vector<Command> build_cli(CLI::App& app, GlobalOptions& global) {
  app.description("ws1check: judges BF16 kernels against the WS1 precision standard");
  app.require_subcommand(1);
  // Usage errors read like every other error: one "ws1check: error:" line, then the hint.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "ws1check: error: " + CLI::FailureMessage::simple(a, e);
  });
  app.set_version_flag("--version", version_line());
  // CLI11 sums a counting flag's values with std::stoll into an int64: a value past its range
  // escaped the parse as std::out_of_range (`--verbose=99999999999999999999` aborted; cli_fuzz)
  // and a large one overflowed the sum. Each value must be a small count: a usage error if not.
  const CLI::Validator small_count(
      [](std::string& v) -> std::string {
        try {
          const std::int64_t n = CLI::detail::to_flag_value(v);
          if (n >= -kMaxFlagCount && n <= kMaxFlagCount) return {};
        } catch (const std::exception&) {
        }
        return "not a count in [-" + std::to_string(kMaxFlagCount) + ", " + std::to_string(kMaxFlagCount) + "]: " + v;
      },
      "");
  app.add_flag("-v,--verbose", global.verbose, "more log output on stderr (repeatable)")->check(small_count);
  app.add_flag("-q,--quiet", global.quiet, "only errors on stderr");

  std::vector<Command> commands;
  commands.push_back(register_env(app));
  commands.push_back(register_fixtures(app));
  commands.push_back(register_accuracy(app));
  commands.push_back(register_invariance(app));
  commands.push_back(register_gate(app));
  commands.push_back(register_ops(app));
  commands.push_back(register_audit(app));
  commands.push_back(register_worker(app));
  commands.push_back(register_bench(app));
  commands.push_back(register_parity(app));
  return commands;
}

int exit_code(ws1::ExitCode code) { return static_cast<int>(code); }

int report(const ws1::Error& error) {
  fmt::print(stderr, "ws1check: error: {}\n", error.message());
  return exit_code(error.code);
}

}  // namespace ws1cli
