// The accuracy judge on the device (ws1/accuracy_parts.hpp): statistics of a (candidate,
// reference) pair whose tensors are both held in device memory, computed where they are, so a
// V x H gradient (6e8 elements) is never copied to the host to be compared. Same record as the
// host judge, bit for bit, but for `engine` = "cuda".
#pragma once

#include <optional>
#include <string>

#include "ws1/evidence.hpp"
#include "ws1/contract.hpp"
#include "ws1/tensor.hpp"

namespace ws1cuda {

// Installs judge_on_device() as ws1's device judge (idempotent). The cuda_bf16 backend and the
// cuda_fp32 reference engine call it when they are made.
void install_device_judge();

// The judge on the device: nothing when it does not apply (a tensor not on the device, an f16
// candidate, more rare pairs than it keeps: the host judge then runs). A CUDA failure throws
// ws1::EnvironmentFailure naming the call. The pair must be comparable (accuracy_incomparable()).
std::optional<ws1::AccuracyTensor> judge_on_device(const std::string& name, const ws1::Tensor& candidate,
                                                   const ws1::Tensor& reference, const ws1::Tolerance& tol);

// A copy of a host tensor held on the device (Tensor::on_device), for tests and tools.
ws1::Tensor to_device_tensor(const ws1::Tensor& t);

}  // namespace ws1cuda
