// Tensors kept on the device across op calls (the chain's weights: the same storage is passed
// to thousands of calls, ~16 GB per forward at Qwen3-8B). Plain C++ header.
//
// keep(t) copies t to the device once and remembers the exact host view (storage address of
// element 0, dtype, shape, strides) with a reference to its storage, so that address cannot be
// reused by another tensor while the entry lives. Any later upload of the same view borrows the
// device copy instead of copying. The caller promises the contents do not change while kept;
// release(t) drops one keep of it (the device copy goes with the last). Thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "ws1/tensor.hpp"

namespace ws1cuda {

// False (with `error` set, nothing of this call kept) when the device cannot take a copy; the
// uploads then copy per call as before.
bool keep_resident(std::span<const ws1::Tensor> tensors, std::string& error);
void release_resident(std::span<const ws1::Tensor> tensors);

// The device copy of `t` when this exact view is kept, else nullptr.
const void* find_resident(const ws1::Tensor& t);

// What is kept now (tests and logs).
std::size_t resident_tensors();
std::size_t resident_bytes();

}  // namespace ws1cuda
