// A DeviceCopy (ws1/tensor.hpp) backed by host memory, for the tests of code that treats
// device-held tensors specially without a GPU: it counts the host fetches.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/tensor.hpp"

namespace ws1_test {

class FakeDeviceCopy final : public ws1::DeviceCopy {
 public:
  explicit FakeDeviceCopy(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  const void* data() const override { return bytes_.data(); }
  std::size_t bytes() const override { return bytes_.size(); }
  void copy_to_host(std::byte* dst) const override {
    if (failures > 0) {  // a failing transfer, as ArrayCopy reports a CUDA error
      --failures;
      throw ws1::EnvironmentFailure("copy of a device-held tensor to the host: planted failure");
    }
    ++fetches;
    std::memcpy(dst, bytes_.data(), bytes_.size());
  }
  mutable int fetches = 0;
  mutable int failures = 0;  // the next `failures` copies throw

 private:
  std::vector<std::byte> bytes_;
};

// A "device-held" tensor with the values of the host tensor `t`, and its fake copy.
struct FakeDeviceTensor {
  ws1::Tensor tensor;
  std::shared_ptr<FakeDeviceCopy> copy;
};
inline FakeDeviceTensor fake_device(const ws1::Tensor& t) {
  const ws1::Tensor c = t.contiguous();
  const auto b = c.bytes();
  auto copy = std::make_shared<FakeDeviceCopy>(std::vector<std::byte>(b.begin(), b.end()));
  return {ws1::Tensor::on_device(t.dtype(), t.shape(), copy), copy};
}

}  // namespace ws1_test
