// Host tensor: a shared byte buffer plus (shape, strides, offset) in elements. Views only
// change the description; contiguous() is the one place that walks arbitrary strides.
#include "ws1/tensor.hpp"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ws1 {
namespace {

[[noreturn]] void misuse(const std::string& what) { throw std::logic_error("ws1::" + what); }

// Bytes for n elements of t, or nullopt when that does not fit in size_t / int64.
std::optional<std::size_t> checked_bytes(std::int64_t n, DType t) {
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(dtype_size(t)), &bytes))
    return std::nullopt;
  return static_cast<std::size_t>(bytes);
}

// Host bytes of one storage. A run makes the same large tensors again and again (a V x H table
// per call and per transform); a fresh mapping of that size costs a page fault and a kernel zero
// fill per 4 KiB page, which measured most of such a run's time on the CPU. So blocks of at least
// kLarge bytes are mapped with transparent huge pages requested, and on release kept in a small
// process-wide cache from which a later block of the same size is taken again.
class HostBlock {
 public:
  HostBlock() = default;
  // n bytes, all zero (zeroed) or with unspecified contents that the caller overwrites whole.
  static HostBlock zeroed(std::size_t n) { return HostBlock(n, true); }
  static HostBlock uninitialized(std::size_t n) { return HostBlock(n, false); }
  HostBlock(HostBlock&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  HostBlock& operator=(HostBlock&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  HostBlock(const HostBlock&) = delete;
  HostBlock& operator=(const HostBlock&) = delete;
  ~HostBlock() { release(); }
  std::byte* data() const { return p_; }

 private:
  static constexpr std::size_t kLarge = std::size_t{64} << 20;
  static constexpr std::size_t kCacheBlocks = 6;

  struct Cache {
    std::mutex mutex;
    std::vector<std::pair<std::size_t, std::byte*>> blocks;  // freed large blocks (size, base)
    std::size_t bytes = 0;
    std::size_t limit = 0;  // a sixteenth of physical memory, at most 8 GiB
  };
  static Cache& cache() {
    static Cache c;
    static std::once_flag once;
    std::call_once(once, [] {
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      const std::size_t phys = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                                     : std::size_t{4} << 30;
      c.limit = std::min(phys / 16, std::size_t{8} << 30);
    });
    return c;
  }

  HostBlock(std::size_t n, bool zero) : n_(n) {
    if (n == 0) return;
    if (n < kLarge) {
      p_ = static_cast<std::byte*>(zero ? std::calloc(n, 1) : std::malloc(n));
      if (p_ == nullptr) throw std::bad_alloc();
      return;
    }
    {
      Cache& c = cache();
      std::lock_guard lock(c.mutex);
      for (auto it = c.blocks.begin(); it != c.blocks.end(); ++it) {
        if (it->first != n) continue;
        p_ = it->second;
        c.bytes -= n;
        c.blocks.erase(it);
        break;
      }
    }
    if (p_ != nullptr) {
      if (zero) std::memset(p_, 0, n);
      return;
    }
    void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    madvise(m, n, MADV_HUGEPAGE);  // advice only: where refused, 4 KiB pages (fresh pages are zero)
    p_ = static_cast<std::byte*>(m);
  }

  void release() {
    if (p_ == nullptr) return;
    if (n_ < kLarge) {
      std::free(p_);
    } else {
      Cache& c = cache();
      std::unique_lock lock(c.mutex);
      if (c.blocks.size() < kCacheBlocks && c.bytes + n_ <= c.limit) {
        c.blocks.emplace_back(n_, p_);
        c.bytes += n_;
      } else {
        lock.unlock();
        munmap(p_, n_);
      }
    }
    p_ = nullptr;
    n_ = 0;
  }

  std::byte* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace

// Host bytes, and optionally a device copy that holds the values until the first host access
// (host_ready false until then). The mutex orders that one fetch between readers.
struct Tensor::Storage {
  HostBlock host;
  std::shared_ptr<const DeviceCopy> device;
  std::atomic<bool> host_ready{true};
  std::mutex mutex;
};

const std::byte* Tensor::host_base() const {
  Storage& s = *storage_;
  if (!s.host_ready.load(std::memory_order_acquire)) {
    std::lock_guard lock(s.mutex);
    if (!s.host_ready.load(std::memory_order_relaxed)) {
      HostBlock h = HostBlock::uninitialized(s.device->bytes());
      s.device->copy_to_host(h.data());
      s.host = std::move(h);
      s.host_ready.store(true, std::memory_order_release);
    }
  }
  return s.host.data();
}

std::byte* Tensor::mutable_host_base() {
  const std::byte* p = host_base();
  if (storage_->device) {
    std::lock_guard lock(storage_->mutex);
    storage_->device.reset();
  }
  return const_cast<std::byte*>(p);
}

Tensor Tensor::on_device(DType dtype, Shape shape, std::shared_ptr<const DeviceCopy> copy) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const auto bytes = checked_bytes(ws1::numel(t.shape_), dtype);
  if (!copy || !bytes || copy->bytes() != *bytes)
    misuse(fmt::format("Tensor::on_device: a device copy of {} bytes for {} {}", copy ? copy->bytes() : 0,
                       dtype_safetensors_name(dtype), shape_string(t.shape_)));
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = std::make_shared<Storage>();
  t.storage_->device = std::move(copy);
  t.storage_->host_ready.store(false, std::memory_order_release);
  return t;
}

const void* Tensor::device_data() const {
  if (!defined() || !is_contiguous()) return nullptr;
  const std::shared_ptr<const DeviceCopy> d = storage_->device;
  if (!d) return nullptr;
  return static_cast<const std::byte*>(d->data()) + static_cast<std::size_t>(offset_) * dtype_size(dtype_);
}

std::optional<std::int64_t> checked_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  return n;
}

std::int64_t numel(const Shape& shape) {
  const auto n = checked_numel(shape);
  if (!n) misuse(fmt::format("numel: invalid shape {} (negative size or overflow)",
                             shape_string(shape)));
  return *n;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Sizes 0 count as 1 here so the strides stay meaningful (and equal PyTorch's) for empty dims.
Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    if (__builtin_mul_overflow(step, std::max<std::int64_t>(shape[i], 1), &step))
      misuse(fmt::format("contiguous_strides: shape {} overflows", shape_string(shape)));
  }
  return strides;
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  const std::int64_t n = ws1::numel(shape_);
  const auto bytes = checked_bytes(n, dtype_);
  if (!bytes) misuse(fmt::format("Tensor: {} {} is too large", dtype_safetensors_name(dtype_),
                                 shape_string(shape_)));
  strides_ = contiguous_strides(shape_);
  storage_ = std::make_shared<Storage>();
  storage_->host = HostBlock::zeroed(*bytes);
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const auto bytes = checked_bytes(ws1::numel(t.shape_), dtype);
  if (!bytes) misuse(fmt::format("Tensor::uninitialized: {} {} is too large", dtype_safetensors_name(dtype),
                                 shape_string(t.shape_)));
  t.strides_ = contiguous_strides(t.shape_);
  t.storage_ = std::make_shared<Storage>();
  t.storage_->host = HostBlock::uninitialized(*bytes);
  return t;
}

Result<Tensor> Tensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes) {
  const auto n = checked_numel(shape);
  const auto need = n ? checked_bytes(*n, dtype) : std::nullopt;
  if (!need)
    return bad_input("", "", fmt::format("invalid {} tensor shape {}: negative size or element "
                                         "count overflows", dtype_safetensors_name(dtype),
                                         shape_string(shape)));
  if (bytes.size() != *need)
    return bad_input("", "", fmt::format("{} bytes of data for a {} tensor of shape {}, which "
                                         "needs {} bytes", bytes.size(),
                                         dtype_safetensors_name(dtype), shape_string(shape),
                                         *need));
  Tensor t = uninitialized(dtype, std::move(shape));
  if (!bytes.empty()) std::memcpy(t.storage_->host.data(), bytes.data(), bytes.size());
  return t;
}

std::int64_t Tensor::numel() const {
  if (!defined()) return 0;
  std::int64_t n = 1;
  for (std::int64_t s : shape_) n *= s;  // validated when the shape was made
  return n;
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  std::int64_t step = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != step) return false;
    step *= shape_[i];
  }
  return true;
}

namespace {
void require_defined(const Tensor& t, const char* call) {
  if (!t.defined()) misuse(fmt::format("Tensor::{}: undefined tensor", call));
}
void require_dim(const Tensor& t, const char* call, int d) {
  if (d < 0 || d >= t.dim())
    misuse(fmt::format("Tensor::{}: dim {} out of range for shape {}", call, d,
                       shape_string(t.shape())));
}
}  // namespace

Tensor Tensor::view(Shape shape) const {
  require_defined(*this, "view");
  if (!is_contiguous())
    misuse(fmt::format("Tensor::view: tensor of shape {} strides {} is not contiguous",
                       shape_string(shape_), shape_string(strides_)));
  const auto inferred = std::count(shape.begin(), shape.end(), std::int64_t{-1});
  if (inferred > 1) misuse("Tensor::view: more than one -1 in " + shape_string(shape));
  if (inferred == 1) {
    Shape known = shape;
    std::erase(known, -1);
    const auto k = checked_numel(known);
    if (!k || *k == 0 || numel() % *k != 0)
      misuse(fmt::format("Tensor::view: cannot infer -1 in {} for {} elements",
                         shape_string(shape), numel()));
    *std::find(shape.begin(), shape.end(), -1) = numel() / *k;
  }
  const auto n = checked_numel(shape);
  if (!n || *n != numel())
    misuse(fmt::format("Tensor::view: shape {} does not hold the {} elements of {}",
                       shape_string(shape), numel(), shape_string(shape_)));
  Tensor out = *this;
  out.strides_ = contiguous_strides(shape);
  out.shape_ = std::move(shape);
  return out;
}

Tensor Tensor::slice(int dim, std::int64_t begin, std::int64_t end) const {
  require_defined(*this, "slice");
  require_dim(*this, "slice", dim);
  const auto d = static_cast<std::size_t>(dim);
  if (begin < 0 || begin > end || end > shape_[d])
    misuse(fmt::format("Tensor::slice: range [{}, {}) out of [0, {}] on dim {} of shape {}",
                       begin, end, shape_[d], dim, shape_string(shape_)));
  Tensor out = *this;
  out.offset_ += begin * strides_[d];
  out.shape_[d] = end - begin;
  return out;
}

Tensor Tensor::transpose(int d0, int d1) const {
  require_defined(*this, "transpose");
  require_dim(*this, "transpose", d0);
  require_dim(*this, "transpose", d1);
  Tensor out = *this;
  std::swap(out.shape_[static_cast<std::size_t>(d0)], out.shape_[static_cast<std::size_t>(d1)]);
  std::swap(out.strides_[static_cast<std::size_t>(d0)],
            out.strides_[static_cast<std::size_t>(d1)]);
  return out;
}

Tensor Tensor::select(int dim, std::int64_t index) const {
  require_defined(*this, "select");
  require_dim(*this, "select", dim);
  const auto d = static_cast<std::size_t>(dim);
  if (index < 0 || index >= shape_[d])
    misuse(fmt::format("Tensor::select: index {} out of [0, {}) on dim {} of shape {}", index,
                       shape_[d], dim, shape_string(shape_)));
  Tensor out = *this;
  out.offset_ += index * strides_[d];
  out.shape_.erase(out.shape_.begin() + dim);
  out.strides_.erase(out.strides_.begin() + dim);
  return out;
}

Tensor Tensor::contiguous() const {
  require_defined(*this, "contiguous");
  Tensor out = uninitialized(dtype_, shape_);  // every element written below
  const std::size_t n = nbytes();
  if (n == 0) return out;
  if (is_contiguous()) {
    std::memcpy(out.raw(), raw(), n);
    return out;
  }
  // Not contiguous and not empty: rank >= 1. Walk the outer dims with an odometer; the
  // innermost dim is one memcpy when it is dense.
  const std::size_t es = dtype_size(dtype_);
  const std::size_t rank = shape_.size();
  const std::int64_t inner = shape_[rank - 1];
  const std::int64_t inner_stride = strides_[rank - 1];
  const std::byte* base = host_base();
  std::byte* dst = out.raw();
  std::vector<std::int64_t> idx(rank - 1, 0);
  std::int64_t src = offset_;  // element offset of the current row's first element
  const std::int64_t rows = numel() / inner;
  for (std::int64_t row = 0; row < rows; ++row) {
    if (inner_stride == 1) {
      std::memcpy(dst, base + static_cast<std::size_t>(src) * es,
                  static_cast<std::size_t>(inner) * es);
      dst += static_cast<std::size_t>(inner) * es;
    } else {
      for (std::int64_t j = 0; j < inner; ++j, dst += es)
        std::memcpy(dst, base + static_cast<std::size_t>(src + j * inner_stride) * es, es);
    }
    for (std::size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < shape_[d]) {
        src += strides_[d];
        break;
      }
      src -= (shape_[d] - 1) * strides_[d];
      idx[d] = 0;
    }
  }
  return out;
}

std::byte* Tensor::raw() {
  if (defined()) mutable_host_base();
  return const_cast<std::byte*>(static_cast<const Tensor&>(*this).raw());
}

const std::byte* Tensor::raw() const {
  if (!defined()) return nullptr;
  // An empty view may carry an offset at (or past) the storage end: never form that pointer.
  if (numel() == 0) return host_base();
  return host_base() + static_cast<std::size_t>(offset_) * dtype_size(dtype_);
}

std::span<const std::byte> Tensor::bytes() const {
  if (!defined()) return {};
  if (!is_contiguous())
    misuse(fmt::format("Tensor::bytes: tensor of shape {} strides {} is not contiguous",
                       shape_string(shape_), shape_string(strides_)));
  return {raw(), nbytes()};
}

std::span<std::byte> Tensor::mutable_bytes() {
  if (defined()) mutable_host_base();
  const auto b = static_cast<const Tensor&>(*this).bytes();
  return {const_cast<std::byte*>(b.data()), b.size()};
}

const std::byte* Tensor::element(std::span<const std::int64_t> index) const {
  require_defined(*this, "element");
  if (static_cast<std::int64_t>(index.size()) != dim())
    misuse(fmt::format("Tensor::element: {} indices for shape {}", index.size(),
                       shape_string(shape_)));
  std::int64_t off = offset_;
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d])
      misuse(fmt::format("Tensor::element: index [{}] out of range for shape {}",
                         fmt::join(index, ", "), shape_string(shape_)));
    off += index[d] * strides_[d];
  }
  return host_base() + static_cast<std::size_t>(off) * dtype_size(dtype_);
}

std::byte* Tensor::element(std::span<const std::int64_t> index) {
  if (defined()) mutable_host_base();
  return const_cast<std::byte*>(static_cast<const Tensor&>(*this).element(index));
}

const std::byte* Tensor::element(std::initializer_list<std::int64_t> index) const {
  return element(std::span<const std::int64_t>(index.begin(), index.size()));
}

std::byte* Tensor::element(std::initializer_list<std::int64_t> index) {
  return element(std::span<const std::int64_t>(index.begin(), index.size()));
}

}  // namespace ws1
