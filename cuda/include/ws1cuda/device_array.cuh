// Device memory for the cuda_bf16 kernels: checked CUDA calls, an owning typed array, and the
// copies between host tensors (ws1::Tensor) and device arrays. Included by .cu files only.
//
// A failing CUDA call or launch throws ws1::ops::DeviceError (ws1/op_inputs.hpp) carrying an
// environment error (exit 3) naming the call, so an op's host function wrapped in ws1::ops::guarded() returns it
// as the op's Error; nothing aborts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "ws1/tensor.hpp"

namespace ws1cuda {

using bf16 = __nv_bfloat16;

// Throws the environment error for `e` ("<what>: cudaErrorX: text").
[[noreturn]] void throw_cuda_error(cudaError_t e, std::string_view what);

inline void check(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess) throw_cuda_error(e, what);
}
// After a kernel launch: a bad configuration or an earlier asynchronous fault.
void check_launch(std::string_view kernel);

#define WS1_CUDA(call) ::ws1cuda::check((call), #call)

// Once per process, before the first allocation: the default pool of the current device keeps
// freed memory for reuse instead of returning it at each synchronisation.
void keep_freed_memory_in_pool();

// A device allocation of n elements of T (no copies; moves transfer ownership). Usually owning;
// borrow() wraps memory someone else keeps alive (a resident weight, ws1cuda/resident.hpp),
// which the holder must only read.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  // Stream-ordered on the default stream (every kernel and copy here runs on it): the device's
  // pool keeps freed blocks (keep_freed_memory_in_pool), so the many small allocations of a
  // decode step cost no cudaMalloc/cudaFree round trips (cudaFree also synchronises).
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n_ == 0) return;
    keep_freed_memory_in_pool();
    WS1_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&p_), n_ * sizeof(T), cudaStreamLegacy));
  }
  static DeviceArray borrow(T* p, std::size_t n) {
    DeviceArray a;
    a.p_ = p;
    a.n_ = n;
    a.owns_ = false;
    return a;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), owns_(std::exchange(o.owns_, true)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      owns_ = std::exchange(o.owns_, true);
    }
    return *this;
  }
  ~DeviceArray() { release(); }

  T* get() { return p_; }
  const T* get() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  void release() noexcept {
    if (p_ != nullptr && owns_) cudaFreeAsync(p_, cudaStreamLegacy);  // a failing free at teardown has nobody to report to
    p_ = nullptr;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
  bool owns_ = true;
};

// Outputs start as all-ones bytes (bf16 and f32 NaN, int -1): an element a kernel forgets to
// write is a NaN the judges report, never a plausible zero.
template <class T>
DeviceArray<T> poisoned(std::size_t n) {
  DeviceArray<T> a(n);
  if (n > 0) WS1_CUDA(cudaMemset(a.get(), 0xFF, a.bytes()));
  return a;
}

// Zero-filled (for accumulators whose start value is zero by definition).
template <class T>
DeviceArray<T> zeros(std::size_t n) {
  DeviceArray<T> a(n);
  if (n > 0) WS1_CUDA(cudaMemset(a.get(), 0, a.bytes()));
  return a;
}

// A host tensor on the device, row-major and contiguous: a strided view is materialised on
// the host first (the upload is where cuda_bf16 accepts any layout; docs/decisions.md D16).
// The tensor's dtype must be bf16 / f32 respectively (std::logic_error otherwise: the op's
// input checks run before any upload). A tensor kept resident (ws1cuda/resident.hpp) is not
// copied: the array borrows its device copy, and the op must only read it.
DeviceArray<bf16> upload_bf16(const ws1::Tensor& t);
DeviceArray<float> upload_f32(const ws1::Tensor& t);
// Integer ids (I32 or I64) widened to int64.
DeviceArray<std::int64_t> upload_i64(const ws1::Tensor& t);
// Bool masks (one byte per element).
DeviceArray<std::uint8_t> upload_bool(const ws1::Tensor& t);

// Device arrays back as host tensors of `shape` (numel(shape) must equal a.size()). Waits for
// the device, so an asynchronous kernel fault surfaces here as an error. A tensor of at least
// kKeepOnDeviceBytes stays on the device (a copy of `a`, Tensor::on_device): its host bytes
// are fetched only if the host reads it, and the device judge compares it where it is.
// Smaller ones are copied at once (a decode step makes hundreds of small outputs; keeping
// each on the device would only hold memory).
inline constexpr std::size_t kKeepOnDeviceBytes = std::size_t{8} << 20;
ws1::Tensor download_bf16(const DeviceArray<bf16>& a, const ws1::Shape& shape);
ws1::Tensor download_f32(const DeviceArray<float>& a, const ws1::Shape& shape);

// `bytes` bytes of device memory at `src`, copied into a new allocation owned by the returned
// DeviceCopy (ws1/tensor.hpp); its copy_to_host() throws ws1::EnvironmentFailure on a CUDA failure.
std::shared_ptr<const ws1::DeviceCopy> device_copy_of(const void* src, std::size_t bytes);
// The same, taking over an allocation that holds the values.
std::shared_ptr<const ws1::DeviceCopy> adopt_as_device_copy(DeviceArray<unsigned char> a);

// Grid size for n items of `per_block` each (at least 1 block).
inline unsigned blocks_for(std::int64_t n, std::int64_t per_block) {
  const std::int64_t b = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

}  // namespace ws1cuda
