// The resident-tensor registry of ws1cuda/resident.hpp.
#include "ws1cuda/resident.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include "ws1cuda/device_array.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

// The exact view: the same storage address alone is not enough (a transposed or narrowed view
// of a weight is a different tensor).
using Key = std::tuple<const void*, ws1::DType, ws1::Shape, ws1::Shape>;

Key key_of(const ws1::Tensor& t) { return {t.raw(), t.dtype(), t.shape(), t.strides()}; }

struct Entry {
  ws1::Tensor host;  // holds the storage, so its address is not reused while kept
  DeviceArray<unsigned char> device;
  int keeps = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<Key, Entry> entries;
  std::size_t bytes = 0;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool keep_resident(std::span<const ws1::Tensor> tensors, std::string& error) {
  std::size_t done = 0;
  try {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const ws1::Tensor& t : tensors) {
      if (!t.defined() || t.numel() == 0) {
        ++done;
        continue;
      }
      Entry& e = r.entries[key_of(t)];
      if (e.keeps == 0) {
        const ws1::Tensor c = t.is_contiguous() ? t : t.contiguous();
        DeviceArray<unsigned char> device(c.nbytes());
        WS1_CUDA(cudaMemcpy(device.get(), c.raw(), c.nbytes(), cudaMemcpyHostToDevice));
        e.host = t;
        e.device = std::move(device);
        r.bytes += c.nbytes();
      }
      ++e.keeps;
      ++done;
    }
  } catch (const ws1::ops::DeviceError& x) {
    error = x.error.problem;
    // Undo this call's keeps (the failing entry, if created, has keeps == 0).
    Registry& r = registry();
    {
      std::lock_guard lock(r.mutex);
      std::erase_if(r.entries, [](const auto& kv) { return kv.second.keeps == 0; });
    }
    release_resident(tensors.first(done));
    return false;
  }
  return true;
}

void release_resident(std::span<const ws1::Tensor> tensors) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (const ws1::Tensor& t : tensors) {
    auto it = r.entries.find(key_of(t));
    if (it == r.entries.end() || --it->second.keeps > 0) continue;
    r.bytes -= it->second.device.bytes();
    r.entries.erase(it);
  }
}

const void* find_resident(const ws1::Tensor& t) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.entries.empty()) return nullptr;
  auto it = r.entries.find(key_of(t));
  return it == r.entries.end() ? nullptr : it->second.device.get();
}

std::size_t resident_tensors() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.entries.size();
}

std::size_t resident_bytes() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.bytes;
}

}  // namespace ws1cuda
