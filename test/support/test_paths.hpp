// Where tests find their data: the source tree, and the shared folder beside the checkout
// (the spec, upstream files and oracles; present on development and CI machines).
#pragma once

#include <filesystem>

#include "ws1_build_config.h"

namespace ws1::test {

inline std::filesystem::path source_root() { return WS1_SOURCE_ROOT; }
inline std::filesystem::path test_data() { return source_root() / "test" / "data"; }
// Upstream data files kept in the repository (copied from ../shared/upstream/, unchanged).
inline std::filesystem::path upstream_data() { return test_data() / "upstream"; }
inline std::filesystem::path shared_dir() { return source_root().parent_path() / "shared"; }

}  // namespace ws1::test
