#include "common.hpp"

#include <fmt/core.h>

#include "ws1/build_info.hpp"

namespace ws1cli {
namespace fs = std::filesystem;

fs::path shipped_file(const std::string& relative) { return ws1::shipped_path(relative); }

std::string default_contract() { return shipped_file("contracts/ws1-c1-v2.json").string(); }
std::string default_workload() {
  return shipped_file("fixtures/ws1-qwen3-8b-dense.json").string();
}

namespace {
std::vector<std::string>& argv_store() {
  static std::vector<std::string> argv;
  return argv;
}
}  // namespace

void set_cli_argv(int argc, char** argv) { argv_store().assign(argv, argv + argc); }
const std::vector<std::string>& cli_argv() { return argv_store(); }

int exit_code(ws1::ExitCode code) { return static_cast<int>(code); }

int report(const ws1::Error& error) {
  fmt::print(stderr, "ws1check: error: {}\n", error.message());
  return exit_code(error.code);
}

}  // namespace ws1cli
