// What the gpu tests share: the cuda_bf16 backend (opened once), the workload they run on
// (WS1_GPU_WORKLOAD, default ws1-smoke; ws1-qwen3-8b-dense for the real widths) and its
// known-red list.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "run_test_support.hpp"
#include "ws1cuda/cuda_backend.hpp"

namespace ws1::test {

inline Backend& cuda_backend() {
  static std::unique_ptr<Backend> b = [] {
    auto r = ws1cuda::make_cuda_bf16_backend();
    if (!r) FAIL(r.error().message());
    return std::move(r).value();
  }();
  return *b;
}

inline std::string gpu_workload_name() {
  const char* w = std::getenv("WS1_GPU_WORKLOAD");
  return w != nullptr && *w != '\0' ? w : "ws1-smoke";
}

// Cells documented red for every backend that implements the declared semantics
// (test/data/known_red/<workload>.txt: one cell id per line, '#' comments; docs/decisions.md
// D11). The tests require the red set to equal it, so a new red and a fixed one both show.
inline std::set<std::string> known_red(const std::string& workload) {
  std::set<std::string> ids;
  std::ifstream f(test_data() / "known_red" / (workload + ".txt"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    ids.insert(line.substr(0, line.find_first_of(" \t")));
  }
  return ids;
}

inline RunContext cuda_run_context(const Workload& w) {
  return make_run_context(w.contract, w.manifest, w.lock, "cuda_bf16", 0);
}

}  // namespace ws1::test
