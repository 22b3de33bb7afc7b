#include "ws1cuda/device_array.cuh"

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

#include "ws1/error.hpp"
#include "ws1cuda/resident.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {

void throw_cuda_error(cudaError_t e, std::string_view what) {
  throw ws1::ops::DeviceError{ws1::environment_error(
      "cuda_bf16", std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e))};
}

void check_launch(std::string_view kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_cuda_error(e, std::string("launch of ") + std::string(kernel));
}

void keep_freed_memory_in_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    int device = 0;
    cudaMemPool_t pool = nullptr;
    WS1_CUDA(cudaGetDevice(&device));
    WS1_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t keep_all = UINT64_MAX;
    WS1_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  });
}

namespace {

class ArrayCopy final : public ws1::DeviceCopy {
 public:
  explicit ArrayCopy(DeviceArray<unsigned char> a) : a_(std::move(a)) {}
  const void* data() const override { return a_.get(); }
  std::size_t bytes() const override { return a_.bytes(); }
  void copy_to_host(std::byte* dst) const override {
    if (a_.bytes() == 0) return;
    const cudaError_t e = cudaMemcpy(dst, a_.get(), a_.bytes(), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      throw ws1::EnvironmentFailure(std::string("copy of a device-held tensor to the host: ") + cudaGetErrorName(e) +
                                    ": " + cudaGetErrorString(e));
  }

 private:
  DeviceArray<unsigned char> a_;
};

}  // namespace

std::shared_ptr<const ws1::DeviceCopy> device_copy_of(const void* src, std::size_t bytes) {
  DeviceArray<unsigned char> a(bytes);
  if (bytes > 0) WS1_CUDA(cudaMemcpy(a.get(), src, bytes, cudaMemcpyDeviceToDevice));
  return adopt_as_device_copy(std::move(a));
}

std::shared_ptr<const ws1::DeviceCopy> adopt_as_device_copy(DeviceArray<unsigned char> a) {
  return std::make_shared<ArrayCopy>(std::move(a));
}

namespace {

template <class T>
DeviceArray<T> upload_as(const ws1::Tensor& t, ws1::DType dtype, const char* what) {
  if (t.dtype() != dtype)
    throw std::logic_error(std::string(what) + ": tensor dtype is " +
                           std::string(ws1::dtype_safetensors_name(t.dtype())));
  // A device-held tensor (an earlier op's large output): copied on the device, never through
  // the host. A copy, not a borrow: an op may write into its input arrays.
  if (const void* held = t.device_data()) {
    DeviceArray<T> a(static_cast<std::size_t>(t.numel()));
    if (a.size() > 0) WS1_CUDA(cudaMemcpy(a.get(), held, a.bytes(), cudaMemcpyDeviceToDevice));
    return a;
  }
  if (const void* kept = find_resident(t))
    return DeviceArray<T>::borrow(static_cast<T*>(const_cast<void*>(kept)), static_cast<std::size_t>(t.numel()));
  const ws1::Tensor c = t.is_contiguous() ? t : t.contiguous();
  DeviceArray<T> a(static_cast<std::size_t>(c.numel()));
  if (a.size() > 0) WS1_CUDA(cudaMemcpy(a.get(), c.raw(), a.bytes(), cudaMemcpyHostToDevice));
  return a;
}

template <class T>
ws1::Tensor download_as(const DeviceArray<T>& a, ws1::DType dtype, const ws1::Shape& shape) {
  if (static_cast<std::size_t>(ws1::numel(shape)) != a.size())
    throw std::logic_error("download: shape " + ws1::shape_string(shape) + " does not hold " +
                           std::to_string(a.size()) + " elements");
  WS1_CUDA(cudaDeviceSynchronize());
  if (a.bytes() >= kKeepOnDeviceBytes) return ws1::Tensor::on_device(dtype, shape, device_copy_of(a.get(), a.bytes()));
  ws1::Tensor t(dtype, shape);
  if (a.size() > 0) WS1_CUDA(cudaMemcpy(t.raw(), a.get(), a.bytes(), cudaMemcpyDeviceToHost));
  return t;
}

}  // namespace

DeviceArray<bf16> upload_bf16(const ws1::Tensor& t) {
  return upload_as<bf16>(t, ws1::DType::kBF16, "upload_bf16");
}
DeviceArray<float> upload_f32(const ws1::Tensor& t) {
  return upload_as<float>(t, ws1::DType::kF32, "upload_f32");
}
DeviceArray<std::uint8_t> upload_bool(const ws1::Tensor& t) {
  return upload_as<std::uint8_t>(t, ws1::DType::kBool, "upload_bool");
}

DeviceArray<std::int64_t> upload_i64(const ws1::Tensor& t) {
  const std::vector<std::int64_t> ids = ws1::ops::to_i64(t);
  DeviceArray<std::int64_t> a(ids.size());
  if (a.size() > 0) WS1_CUDA(cudaMemcpy(a.get(), ids.data(), a.bytes(), cudaMemcpyHostToDevice));
  return a;
}

ws1::Tensor download_bf16(const DeviceArray<bf16>& a, const ws1::Shape& shape) {
  return download_as(a, ws1::DType::kBF16, shape);
}
ws1::Tensor download_f32(const DeviceArray<float>& a, const ws1::Shape& shape) {
  return download_as(a, ws1::DType::kF32, shape);
}

}  // namespace ws1cuda
