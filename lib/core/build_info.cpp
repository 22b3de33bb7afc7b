#include "ws1/build_info.hpp"

#include <sstream>

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

}  // namespace ws1
