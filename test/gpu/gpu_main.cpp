// The gpu suite's main: without a usable CUDA device it exits 77 (Meson's "skipped") after
// saying why, so the suite can be listed on machines without a GPU and never passes there.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "ws1cuda/device_info.hpp"

int main(int argc, char** argv) {
  const ws1cuda::DeviceInfo d = ws1cuda::query_device();
  if (!d.present) {
    std::fprintf(stderr, "gpu suite skipped: %s\n", d.error.c_str());
    return 77;
  }
  std::fprintf(stderr, "gpu suite on %s (cc %d.%d, %d SMs)\n", d.name.c_str(), d.cc_major,
               d.cc_minor, d.sm_count);
  return Catch::Session().run(argc, argv);
}
