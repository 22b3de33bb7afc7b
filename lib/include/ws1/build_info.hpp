// What this binary is: version, compiler, build type, and the source state it was built from.
#pragma once

#include <filesystem>
#include <string>

namespace ws1 {

struct BuildInfo {
  std::string version;       // project version
  std::string compiler;      // e.g. "gcc 12.2.0"
  std::string build_type;    // Meson buildtype
  std::string source_commit; // commit of the tree the binary was built from, or "unknown"
  std::string source_state;  // "clean", "dirty" or "unknown"
  std::string source_root;   // the checkout it was built from
  bool cuda = false;         // built with the CUDA library
};

const BuildInfo& build_info();

// A data file shipped with ws1check (contracts/, fixtures/, triton/), by its path relative to
// the tree: under $WS1CHECK_DATA_DIR when set; else in <exe>/../share/ws1check, where `meson
// install` puts them, when it is there; else in the source tree the binary was built from
// (a build-tree binary). The last is returned when none exists, so errors name it.
std::filesystem::path shipped_path(const std::string& relative);

}  // namespace ws1
