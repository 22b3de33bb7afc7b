// A small host tensor: dtype, shape, element strides, owned storage shared between views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"

namespace ws1 {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[4, 27, 151936]"
Shape contiguous_strides(const Shape& shape);  // row-major, in elements

class Tensor {
 public:
  Tensor() = default;
  // A new zero-filled contiguous tensor.
  Tensor(DType dtype, Shape shape);
  // A contiguous tensor holding a copy of `bytes` (size must be numel * dtype size).
  static Result<Tensor> from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  std::int64_t offset() const { return offset_; }    // in elements, into the storage
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  bool defined() const { return storage_ != nullptr; }

  // Views share storage with this tensor.
  Tensor view(Shape shape) const;                                 // reshape; needs contiguous
  Tensor slice(int dim, std::int64_t begin, std::int64_t end) const;  // [begin, end) along dim
  Tensor transpose(int d0, int d1) const;
  Tensor select(int dim, std::int64_t index) const;               // drops `dim`
  // A contiguous copy (always a new storage).
  Tensor contiguous() const;

  // Raw storage access. For a contiguous tensor data<T>() points at element 0.
  template <class T>
  T* data() { return reinterpret_cast<T*>(raw()) ; }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(raw()); }
  std::byte* raw();
  const std::byte* raw() const;
  // Bytes of a contiguous tensor.
  std::span<const std::byte> bytes() const;
  std::span<std::byte> mutable_bytes();

  // Element pointer for a multi-index (any layout).
  const std::byte* element(std::span<const std::int64_t> index) const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
  std::shared_ptr<std::vector<std::byte>> storage_;
};

}  // namespace ws1
