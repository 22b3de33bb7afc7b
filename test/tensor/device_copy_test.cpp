// Tensor::on_device(): values held by a DeviceCopy are fetched to the host once, on the first
// host access; device_data() reaches them while no mutable host access has happened. The
// "device" here is host memory behind the DeviceCopy interface, which counts its fetches.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "fake_device_copy.hpp"
#include "ws1/tensor.hpp"

namespace {

using ws1_test::FakeDeviceCopy;

struct Made {
  ws1::Tensor t;
  std::shared_ptr<FakeDeviceCopy> copy;
};

// Element i holds i + 0.5.
Made make(ws1::Shape shape) {
  ws1::Tensor host(ws1::DType::kF32, std::move(shape));
  for (std::int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = static_cast<float>(i) + 0.5f;
  ws1_test::FakeDeviceTensor d = ws1_test::fake_device(host);
  return {d.tensor, d.copy};
}

}  // namespace

TEST_CASE("on_device: fetched once, on the first host read", "[tensor]") {
  Made m = make({3, 4});
  const ws1::Tensor& t = m.t;
  CHECK(m.copy->fetches == 0);
  CHECK(t.device_data() == m.copy->data());
  CHECK(t.is_contiguous());
  CHECK(t.numel() == 12);
  CHECK(m.copy->fetches == 0);  // metadata needs no fetch
  CHECK(t.data<float>()[5] == 5.5f);
  CHECK(m.copy->fetches == 1);
  CHECK(*reinterpret_cast<const float*>(t.element({2, 3})) == 11.5f);
  CHECK(t.contiguous().data<float>()[11] == 11.5f);
  CHECK(m.copy->fetches == 1);
  CHECK(t.device_data() == m.copy->data());  // a read keeps the device copy
}

TEST_CASE("on_device: views reach the device copy while contiguous", "[tensor]") {
  Made m = make({4, 6});
  const ws1::Tensor rows = m.t.slice(0, 1, 3);
  CHECK(rows.device_data() == static_cast<const std::byte*>(m.copy->data()) + 6 * sizeof(float));
  CHECK(m.t.transpose(0, 1).device_data() == nullptr);  // strided: host only
  CHECK(m.t.slice(1, 0, 2).device_data() == nullptr);
  CHECK(m.t.view({24}).device_data() == m.copy->data());
  CHECK(m.copy->fetches == 0);
  CHECK(m.t.transpose(0, 1).contiguous().data<float>()[1] == 6.5f);  // [0][1] of the transpose
  CHECK(m.copy->fetches == 1);
}

TEST_CASE("on_device: a mutable host access drops the device copy for every view", "[tensor]") {
  Made m = make({2, 2});
  ws1::Tensor view = m.t.view({4});
  view.data<float>()[0] = -1.0f;  // non-const access: the host bytes are now the values
  CHECK(m.copy->fetches == 1);
  CHECK(view.device_data() == nullptr);
  CHECK(m.t.device_data() == nullptr);
  CHECK(m.t.data<float>()[0] == -1.0f);
  CHECK(m.t.data<float>()[3] == 3.5f);
}

TEST_CASE("on_device: concurrent first reads fetch once", "[tensor]") {
  Made m = make({1024});
  std::vector<std::thread> readers;
  std::vector<float> seen(8);
  for (std::size_t i = 0; i < seen.size(); ++i)
    readers.emplace_back([&, i] { seen[i] = std::as_const(m.t).data<float>()[1000]; });
  for (std::thread& r : readers) r.join();
  CHECK(m.copy->fetches == 1);
  for (float v : seen) CHECK(v == 1000.5f);
}

TEST_CASE("on_device: a copy of the wrong size is misuse", "[tensor]") {
  auto copy = std::make_shared<FakeDeviceCopy>(std::vector<std::byte>(20));
  CHECK_THROWS_AS(ws1::Tensor::on_device(ws1::DType::kF32, {2, 3}, copy), std::logic_error);
  CHECK_THROWS_AS(ws1::Tensor::on_device(ws1::DType::kF32, {2, 3}, nullptr), std::logic_error);
}

TEST_CASE("on_device: a failed fetch is an environment failure and leaves no half copy", "[tensor]") {
  Made m = make({3, 5});
  const ws1::Tensor& t = m.t;
  m.copy->failures = 1;
  // The CLI reports this type as an environment error (exit 3), not an internal one.
  CHECK_THROWS_AS(t.data<float>(), ws1::EnvironmentFailure);
  CHECK(m.copy->fetches == 0);
  CHECK(t.device_data() == m.copy->data());  // still held on the device
  // The next read fetches again and sees every value.
  const float* v = t.data<float>();
  CHECK(m.copy->fetches == 1);
  for (int i = 0; i < 15; ++i) CHECK(v[i] == static_cast<float>(i) + 0.5f);
}
