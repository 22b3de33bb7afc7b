// Writing safetensors files in the canonical layout (see safetensors.hpp): the header is built
// with nlohmann ordered_json (compact, keys in our order), padded with spaces to a multiple of 8;
// the file goes to a temporary name in the target directory and is renamed over the target.
#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "detail.hpp"

namespace ws1 {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this writer copies memory as is");

using safetensors_detail::printable;
using Sink = std::function<Status(std::span<const std::byte>)>;

// The reference writer's order: descending dtype alignment, then its dtype enum order.
int dtype_rank(DType t) {
  switch (t) {
    case DType::kI64: return 0;
    case DType::kF64: return 1;
    case DType::kF32: return 2;
    case DType::kI32: return 3;
    case DType::kBF16: return 4;
    case DType::kF16: return 5;
    case DType::kU8: return 6;
    case DType::kBool: return 7;
  }
  return 8;
}

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

struct Prepared {
  std::string header;                      // padded JSON
  std::vector<const NamedTensor*> order;   // data order
};

Result<Prepared> prepare(std::span<const NamedTensor> tensors, const SafetensorsMetadata& metadata,
                         const std::string& file) {
  std::unordered_set<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    const std::string where = name.empty() ? "tensor name" : printable(name);
    if (name.empty()) return bad_input(file, where, "a tensor name must not be empty");
    if (name == "__metadata__")
      return bad_input(file, where, "\"__metadata__\" is reserved and cannot name a tensor");
    if (!valid_utf8(name)) return bad_input(file, where, "tensor name is not valid UTF-8");
    if (!names.insert(name).second) return bad_input(file, where, "duplicate tensor name");
    if (!t.defined())
      return bad_input(file, where, "tensor has no storage (default-constructed Tensor)");
  }
  for (const auto& [key, value] : metadata)
    if (!valid_utf8(key) || !valid_utf8(value))
      return bad_input(file, "__metadata__." + printable(key), "metadata is not valid UTF-8");

  Prepared p;
  for (const NamedTensor& nt : tensors) p.order.push_back(&nt);
  std::sort(p.order.begin(), p.order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    const int ra = dtype_rank(a->tensor.dtype()), rb = dtype_rank(b->tensor.dtype());
    return ra != rb ? ra < rb : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const NamedTensor* nt : p.order) {
    const Tensor& t = nt->tensor;
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    for (std::int64_t d : t.shape()) shape.push_back(static_cast<std::uint64_t>(d));
    const std::uint64_t end = offset + t.nbytes();
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(dtype_safetensors_name(t.dtype()));
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = nlohmann::ordered_json::array({offset, end});
    header[nt->name] = std::move(entry);
    offset = end;
  }
  p.header = header.dump();
  p.header.append((8 - p.header.size() % 8) % 8, ' ');
  return p;
}

// Header length, header, then each tensor's row-major bytes.
Status emit(const Prepared& p, const Sink& sink) {
  std::array<std::byte, 8> n{};
  const std::uint64_t size = p.header.size();
  for (int i = 0; i < 8; ++i) n[i] = static_cast<std::byte>((size >> (8 * i)) & 0xFF);
  if (Status s = sink(n); !s) return s;
  if (Status s = sink(std::as_bytes(std::span(p.header))); !s) return s;
  for (const NamedTensor* nt : p.order) {
    const Tensor& t = nt->tensor;
    if (t.numel() == 0) continue;
    if (t.is_contiguous()) {
      if (Status s = sink(t.bytes()); !s) return s;
    } else {
      const Tensor c = t.contiguous();
      if (Status s = sink(c.bytes()); !s) return s;
    }
  }
  return {};
}

// A temporary file beside the target; removed unless committed.
class TempFile {
 public:
  explicit TempFile(std::filesystem::path target) : target_(std::move(target)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty() && !committed_) ::unlink(path_.c_str());
  }

  Status create(const std::string& display) {
    static std::atomic<unsigned> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    std::filesystem::path dir = target_.parent_path();
    if (dir.empty()) dir = ".";
    path_ = dir / fmt::format(".{}.tmp-{}-{}-{}", target_.filename().string(), ::getpid(),
                              counter.fetch_add(1), stamp);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0) {
      const int err = errno;
      path_.clear();  // nothing was created
      return bad_input(display, "write",
                       fmt::format("cannot create a file in {}: {}", dir.string(),
                                   std::strerror(err)));
    }
    return {};
  }

  Status write(std::span<const std::byte> bytes, const std::string& display) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return bad_input(display, "write", std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    return {};
  }

  // fsync (durable), close and rename over the target.
  Status commit(const std::string& display, Durability durability) {
    if (durability == Durability::kDurable && ::fsync(fd_) != 0)
      return bad_input(display, "write", std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return bad_input(display, "write", std::strerror(errno));
    if (::rename(path_.c_str(), target_.c_str()) != 0)
      return bad_input(display, "write",
                       fmt::format("cannot rename the finished file into place: {}",
                                   std::strerror(errno)));
    committed_ = true;
    return {};
  }

 private:
  std::filesystem::path target_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

Result<std::vector<std::byte>> serialize_safetensors(std::span<const NamedTensor> tensors,
                                                     const SafetensorsMetadata& metadata) {
  const std::string display = "(safetensors in memory)";
  try {
    Result<Prepared> p = prepare(tensors, metadata, display);
    if (!p) return p.error();
    std::vector<std::byte> out;
    Status s = emit(*p, [&](std::span<const std::byte> bytes) -> Status {
      out.insert(out.end(), bytes.begin(), bytes.end());
      return {};
    });
    if (!s) return s.error();
    return out;
  } catch (const std::exception& e) {
    return bad_input(display, "write", e.what());
  }
}

Status write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                         const SafetensorsMetadata& metadata, Durability durability) {
  const std::string display = path.string();
  try {
    if (!path.has_filename()) return bad_input(display, "write", "the path names no file");
    Result<Prepared> p = prepare(tensors, metadata, display);
    if (!p) return p.error();
    TempFile tmp(path);
    if (Status s = tmp.create(display); !s) return s;
    if (Status s = emit(*p, [&](std::span<const std::byte> b) { return tmp.write(b, display); });
        !s)
      return s;
    return tmp.commit(display, durability);
  } catch (const std::exception& e) {
    return bad_input(display, "write", e.what());
  }
}

}  // namespace ws1
