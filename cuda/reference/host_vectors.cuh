// Internal to the cuda_fp32 references: host-side vectors (target ids, mask flags) copied to
// the device as they are.
#pragma once

#include <vector>

#include "ws1cuda/device_array.cuh"

namespace ws1cuda::reference {

// A device copy of `v` (an empty array, get() == nullptr, for an empty vector).
template <class T>
DeviceArray<T> to_device(const std::vector<T>& v) {
  DeviceArray<T> d(v.size());
  if (!v.empty()) WS1_CUDA(cudaMemcpy(d.get(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace ws1cuda::reference
