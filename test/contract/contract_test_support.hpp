// Shared helpers of the contract tests: the contract files, an independent reading of their
// JSON (nlohmann, not the simdjson loader under test), and scratch files for edited contracts.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_paths.hpp"

namespace ws1::test {

using ojson = nlohmann::ordered_json;

inline std::filesystem::path our_contract() {
  return source_root() / "contracts" / "ws1-c1-v2.json";
}
inline std::filesystem::path upstream_contract() {
  return upstream_contracts() / "tolerance_contract.ws1-c1-v2.json";
}
inline std::filesystem::path upstream_profile() {
  return upstream_contracts() / "profile-ws1.latest.json";
}
inline std::filesystem::path contract_schema() {
  return source_root() / "contracts" / "contract.schema.json";
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline ojson read_json(const std::filesystem::path& p) { return ojson::parse(read_text(p)); }

// A per-process scratch directory, removed at exit; each edited contract is written there
// under its case name, so an error's file name identifies the case.
inline std::filesystem::path scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir()
        : path(std::filesystem::temp_directory_path() /
               ("ws1-contract-test-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline std::filesystem::path write_scratch(const std::string& name, const std::string& text) {
  const auto p = scratch_dir() / (name + ".json");
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

}  // namespace ws1::test
