// A small host tensor: dtype, shape, element strides, owned storage shared between views.
//
// Misuse is a programming error, not bad input: a negative size, a dim outside [0, dim()),
// an index or range outside the shape, view() or bytes() on a non-contiguous tensor, or any
// view of an undefined tensor throws std::logic_error (the message names the call and the
// values). Nothing is clamped or wrapped (no Python-style negative dims). Data read from files
// goes through from_bytes(), which returns an Error instead.
//
// Copying a Tensor copies the handle: the copy is another view of the same storage.
// contiguous() makes an independent copy.
//
// A tensor may hold its values in an accelerator's memory (on_device(), made by the CUDA layer):
// its host bytes are then copied on the first host access, once, and device_data() lets an
// accelerator's code (the device judge) read the values where they are, so a multi-GB output
// is never copied to the host only to be compared there. Any mutable host access (non-const
// raw(), data(), element(), mutable_bytes()) drops the device copy: the host bytes are then the
// values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"

namespace ws1 {

using Shape = std::vector<std::int64_t>;

// Values of a tensor held in an accelerator's memory (implemented by the CUDA layer).
class DeviceCopy {
 public:
  virtual ~DeviceCopy() = default;
  virtual const void* data() const = 0;  // device address of the first byte
  virtual std::size_t bytes() const = 0;
  // Copies every byte to `dst`; throws ws1::EnvironmentFailure (ws1/error.hpp) naming the failure.
  virtual void copy_to_host(std::byte* dst) const = 0;
};

// Product of the sizes (1 for rank 0). Throws std::logic_error on a negative size or when
// the product overflows int64; checked_numel() returns nullopt instead (for untrusted shapes).
std::int64_t numel(const Shape& shape);
std::optional<std::int64_t> checked_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[4, 27, 151936]", "[]" for rank 0
Shape contiguous_strides(const Shape& shape);  // row-major, in elements

class Tensor {
 public:
  Tensor() = default;
  // A new zero-filled contiguous tensor.
  Tensor(DType dtype, Shape shape);
  // A new contiguous tensor whose contents are unspecified: for a caller that writes every
  // element before any read (saves the zero fill of large tensors).
  static Tensor uninitialized(DType dtype, Shape shape);
  // A contiguous tensor holding a copy of `bytes` (size must be numel * dtype size). A size
  // mismatch or an invalid shape is an Error (bad input, file and where left empty for the
  // caller to fill) stating expected and actual byte counts.
  static Result<Tensor> from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);
  // A contiguous tensor whose values are `copy` (copy->bytes() must equal numel * dtype size:
  // std::logic_error otherwise); the host bytes are fetched on first host access.
  static Tensor on_device(DType dtype, Shape shape, std::shared_ptr<const DeviceCopy> copy);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  std::int64_t offset() const { return offset_; }    // in elements, into the storage
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const;  // 0 for an undefined tensor
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  // Row-major dense from offset(): sizes-1 dims may have any stride; empty tensors are.
  bool is_contiguous() const;
  bool defined() const { return storage_ != nullptr; }
  // The device address of element 0 when the values are held on a device (on_device(), and no
  // mutable host access since) and this view is contiguous; nullptr otherwise.
  const void* device_data() const;

  // Views share storage with this tensor.
  Tensor view(Shape shape) const;  // reshape; needs contiguous; one size may be -1 (inferred)
  Tensor slice(int dim, std::int64_t begin, std::int64_t end) const;  // [begin, end) along dim
  Tensor transpose(int d0, int d1) const;
  Tensor select(int dim, std::int64_t index) const;               // drops `dim`
  // A contiguous copy (always a new storage).
  Tensor contiguous() const;

  // Raw storage access: the address of element 0 (of the view). For an empty tensor it is
  // the storage start; nullptr for an undefined one.
  template <class T>
  T* data() { return reinterpret_cast<T*>(raw()) ; }
  template <class T>
  const T* data() const { return reinterpret_cast<const T*>(raw()); }
  std::byte* raw();
  const std::byte* raw() const;
  // Bytes of a contiguous tensor (std::logic_error if it is not; empty if undefined).
  std::span<const std::byte> bytes() const;
  std::span<std::byte> mutable_bytes();

  // Element pointer for a multi-index (any layout); index.size() must equal dim().
  const std::byte* element(std::span<const std::int64_t> index) const;
  std::byte* element(std::span<const std::int64_t> index);
  // The same with a braced index: t.element({1, 2}).
  const std::byte* element(std::initializer_list<std::int64_t> index) const;
  std::byte* element(std::initializer_list<std::int64_t> index);

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  std::int64_t offset_ = 0;
  struct Storage;
  // The storage's host bytes: fetched from the device copy on the first call.
  const std::byte* host_base() const;
  // The same, for writing: the device copy no longer holds the values and is dropped.
  std::byte* mutable_host_base();
  std::shared_ptr<Storage> storage_;
};

// A tensor with its name (fixture inputs, op outputs, safetensors entries).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace ws1
