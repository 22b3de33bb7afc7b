// Timing of the cuda_bf16 kernels for `ws1check bench` (docs/performance.md). Plain C++ header.
//
// An op's host function wraps the launches of one direction in launch_region()
// (launch_region.cuh). Outside a BenchScope the region runs once; inside one it runs
// `warmup` times, then `reps` times each timed with CUDA events around the launches only
// (uploads and downloads stay outside), with the L2 cache flushed before each timed run, and
// once more so the op's outputs are what a single call gives.
#pragma once

#include <string>
#include <vector>

namespace ws1cuda {

struct BenchSettings {
  int warmup = 5;
  int reps = 50;
  bool flush_l2 = true;  // write a buffer of 2x the L2 size between timed runs
};

struct RegionTiming {
  std::string region;     // "rms_norm.fwd"
  std::vector<float> ms;  // one sample per timed run, in run order
  double median_ms() const;
  double min_ms() const;
  double max_ms() const;
};

// Activates timing for launch_region() calls on this thread while it lives.
class BenchScope {
 public:
  explicit BenchScope(BenchSettings settings);
  ~BenchScope();
  BenchScope(const BenchScope&) = delete;
  BenchScope& operator=(const BenchScope&) = delete;
  // The regions timed so far, in first-run order; clears them.
  std::vector<RegionTiming> take();
};

// Ceilings measured in the same run (METHOD: measure, do not quote datasheets). Each throws
// nothing: a failing CUDA call gives a negative value and the error text in `error`.
struct Ceiling {
  double value = -1.0;  // TB/s or TFLOP/s
  double median_ms = 0.0;
  std::string error;
};
// Device-to-device copy of `bytes`, counting bytes read plus bytes written.
Ceiling measure_copy_bandwidth(std::size_t bytes, const BenchSettings& s);
// cuBLAS bf16 GEMM (bf16 inputs and output, FP32 compute, default math: no TF32 is involved
// with bf16 operands) of C[m,n] = A[m,k] B[k,n], in TFLOP/s.
Ceiling measure_cublas_bf16_gemm(int m, int n, int k, const BenchSettings& s);

}  // namespace ws1cuda
