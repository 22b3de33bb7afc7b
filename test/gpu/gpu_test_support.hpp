// What the gpu tests share: the cuda_bf16 backend (opened once), the workload they run on
// (WS1_GPU_WORKLOAD, default ws1-smoke; ws1-qwen3-8b-dense for the real widths, ws1-bench-8k
// for 8192 tokens) and its known-red list, and where the golds come from (WS1_GPU_REFERENCE:
// "cpu", the default, or "cuda_fp32", which 8192 tokens need: the CPU references would take
// hours there); and a raw-bit comparison of two tensors.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "run_test_support.hpp"
#include "ws1cuda/cuda_backend.hpp"
#include "ws1cuda/cuda_reference.hpp"

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

// nullptr: each op's CPU reference. Any value but cpu / cuda_fp32 fails the test.
inline ReferenceEngine* gpu_reference() {
  const char* r = std::getenv("WS1_GPU_REFERENCE");
  const std::string want = r != nullptr && *r != '\0' ? r : "cpu";
  if (want == "cpu") return nullptr;
  if (want != "cuda_fp32") FAIL("WS1_GPU_REFERENCE=" << want << ": not cpu or cuda_fp32");
  static std::unique_ptr<ReferenceEngine> e = [] {
    auto x = ws1cuda::make_cuda_fp32_reference();
    if (!x) FAIL(x.error().message());
    return std::move(x).value();
  }();
  return e.get();
}

inline RunContext cuda_run_context(const Workload& w) {
  RunContext run = make_run_context(w.contract, w.manifest, w.lock, "cuda_bf16", 0);
  run.reference = gpu_reference();
  return run;
}

// Same dtype, shape and bytes (any strides: both are compared as contiguous copies).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.nbytes() == 0 || std::memcmp(x.bytes().data(), y.bytes().data(), x.nbytes()) == 0;
}

}  // namespace ws1::test
