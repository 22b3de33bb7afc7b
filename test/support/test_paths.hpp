// Where tests find their data: the source tree, and the shared folder beside the checkout
// (the spec, upstream files and oracles; present on development and CI machines).
#pragma once

#include <cstdlib>
#include <filesystem>

#include "ws1_build_config.h"

namespace ws1::test {

// WS1CHECK_DATA_DIR (as for the CLI) points a test binary built elsewhere at a copy of the tree.
inline std::filesystem::path source_root() {
  if (const char* dir = std::getenv("WS1CHECK_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return WS1_SOURCE_ROOT;
}
inline std::filesystem::path test_data() { return source_root() / "test" / "data"; }
// Upstream data files kept in the repository (copied from ../shared/upstream/, unchanged).
inline std::filesystem::path upstream_data() { return test_data() / "upstream"; }
// Upstream's contracts (ws1-c1-v2 and its profile), verbatim: tolerances live in contracts/.
inline std::filesystem::path upstream_contracts() { return source_root() / "contracts" / "upstream"; }
inline std::filesystem::path shared_dir() { return source_root().parent_path() / "shared"; }

}  // namespace ws1::test
