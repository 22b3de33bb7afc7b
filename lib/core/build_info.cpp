#include "ws1/build_info.hpp"

#include <cstdlib>
#include <sstream>
#include <system_error>

#include "ws1_build_config.h"

namespace ws1 {
namespace detail {
extern const char* const kSourceState;
}

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = WS1_VERSION;
    b.compiler = WS1_COMPILER;
    b.build_type = WS1_BUILD_TYPE;
    b.source_root = WS1_SOURCE_ROOT;
    b.cuda = WS1_HAVE_CUDA != 0;
    std::istringstream in(detail::kSourceState);
    if (!(in >> b.source_commit >> b.source_state)) {
      b.source_commit = "unknown";
      b.source_state = "unknown";
    }
    return b;
  }();
  return info;
}

std::filesystem::path shipped_path(const std::string& relative) {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("WS1CHECK_DATA_DIR"); dir != nullptr && *dir != '\0') return fs::path(dir) / relative;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "ws1check" / relative;
    if (fs::exists(installed, ec)) return installed;
  }
  return fs::path(build_info().source_root) / relative;
}

}  // namespace ws1
