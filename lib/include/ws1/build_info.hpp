// What this binary is: version, compiler, build type, and the source state it was built from.
#pragma once

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

}  // namespace ws1
