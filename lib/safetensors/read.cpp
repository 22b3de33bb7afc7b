// Reading safetensors files: from disk with pread (only the header, or the header and each
// tensor straight into its storage), or from bytes in memory. Every offset used here has been
// checked against the file size by parse_header, so a lying header cannot make us read past
// the end of the input.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "detail.hpp"

namespace ws1 {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

using safetensors_detail::check_bool_bytes;
using safetensors_detail::header_length;
using safetensors_detail::parse_header;
using safetensors_detail::printable;

// An open file descriptor, closed on scope exit.
class InputFile {
 public:
  static Result<InputFile> open(const std::filesystem::path& path, const std::string& display) {
    InputFile f;
    f.display_ = display;
    f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd_ < 0) return bad_input(display, "open", std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd_, &st) != 0) return bad_input(display, "open", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return bad_input(display, "open", "not a regular file");
    f.size_ = static_cast<std::uint64_t>(st.st_size);
    return f;
  }
  InputFile(InputFile&& o) noexcept : fd_(o.fd_), size_(o.size_), display_(std::move(o.display_)) {
    o.fd_ = -1;
  }
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::uint64_t size() const { return size_; }

  // Exactly out.size() bytes from `offset`.
  Status read_at(std::uint64_t offset, std::span<std::byte> out) const {
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done,
                                  static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        return bad_input(display_, fmt::format("byte {}", offset + done), std::strerror(errno));
      if (got == 0)
        return bad_input(display_, fmt::format("byte {}", offset + done),
                         "unexpected end of file (did the file change while being read?)");
      done += static_cast<std::size_t>(got);
    }
    return {};
  }

 private:
  InputFile() = default;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string display_;
};

Result<SafetensorsIndex> read_index(const InputFile& in, const std::string& display) {
  std::array<std::byte, 8> prefix{};
  const std::size_t prefix_size = static_cast<std::size_t>(std::min<std::uint64_t>(8, in.size()));
  if (Status s = in.read_at(0, std::span(prefix).first(prefix_size)); !s) return s.error();
  Result<std::uint64_t> n = header_length(std::span(prefix).first(prefix_size), in.size(), display);
  if (!n) return n.error();
  std::vector<std::byte> header(static_cast<std::size_t>(*n));
  if (Status s = in.read_at(8, header); !s) return s.error();
  return parse_header(header, in.size(), display);
}

// One tensor of `entry`, its bytes filled by `fill` (which gets the destination span).
template <class Fill>
Result<Tensor> load_tensor(const SafetensorsEntry& entry, const std::string& display, Fill&& fill) {
  Tensor t = Tensor::uninitialized(entry.dtype, entry.shape);  // every byte filled below, or an error
  std::span<std::byte> out = t.mutable_bytes();
  if (out.size() != entry.nbytes())  // cannot happen after validation; never write past `out`
    return bad_input(display, printable(entry.name), "internal error: tensor size mismatch");
  if (Status s = fill(out); !s) return s.error();
  if (entry.dtype == DType::kBool)
    if (Status s = check_bool_bytes(out, entry, display); !s) return s.error();
  return t;
}

}  // namespace

const SafetensorsEntry* SafetensorsIndex::find(std::string_view name) const {
  for (const SafetensorsEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

const Tensor* SafetensorsFile::find(std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

Result<SafetensorsIndex> read_safetensors_header(const std::filesystem::path& path) {
  const std::string display = path.string();
  try {
    Result<InputFile> in = InputFile::open(path, display);
    if (!in) return in.error();
    return read_index(*in, display);
  } catch (const std::exception& e) {
    return bad_input(display, "header", fmt::format("cannot be read ({})", e.what()));
  }
}

Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path) {
  const std::string display = path.string();
  try {
    Result<InputFile> in = InputFile::open(path, display);
    if (!in) return in.error();
    Result<SafetensorsIndex> index = read_index(*in, display);
    if (!index) return index.error();
    SafetensorsFile file;
    file.metadata = std::move(index->metadata);
    file.tensors.reserve(index->entries.size());
    for (const SafetensorsEntry& e : index->entries) {
      Result<Tensor> t = load_tensor(e, display, [&](std::span<std::byte> out) {
        return in->read_at(index->data_start + e.begin, out);
      });
      if (!t) return t.error();
      file.tensors.push_back(NamedTensor{e.name, std::move(*t)});
    }
    return file;
  } catch (const std::exception& e) {
    return bad_input(display, "data", fmt::format("cannot hold the tensors ({})", e.what()));
  }
}

Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes,
                                          std::string_view display_name) {
  const std::string display(display_name);
  try {
    Result<std::uint64_t> n = header_length(bytes.first(std::min<std::size_t>(8, bytes.size())),
                                            bytes.size(), display);
    if (!n) return n.error();
    Result<SafetensorsIndex> index =
        parse_header(bytes.subspan(8, static_cast<std::size_t>(*n)), bytes.size(), display);
    if (!index) return index.error();
    SafetensorsFile file;
    file.metadata = std::move(index->metadata);
    file.tensors.reserve(index->entries.size());
    for (const SafetensorsEntry& e : index->entries) {
      // Validated: data_start + end <= bytes.size().
      const auto src = bytes.subspan(static_cast<std::size_t>(index->data_start + e.begin),
                                     static_cast<std::size_t>(e.nbytes()));
      Result<Tensor> t = load_tensor(e, display, [&](std::span<std::byte> out) -> Status {
        std::copy(src.begin(), src.end(), out.begin());
        return {};
      });
      if (!t) return t.error();
      file.tensors.push_back(NamedTensor{e.name, std::move(*t)});
    }
    return file;
  } catch (const std::exception& e) {
    return bad_input(display, "data", fmt::format("cannot hold the tensors ({})", e.what()));
  }
}

Result<Tensor> read_safetensors_tensor(const std::filesystem::path& path,
                                       const SafetensorsIndex& index, std::string_view name) {
  const std::string display = path.string();
  const SafetensorsEntry* e = index.find(name);
  if (e == nullptr)
    return bad_input(display, printable(name), "no tensor of this name in the file");
  try {
    Result<InputFile> in = InputFile::open(path, display);
    if (!in) return in.error();
    if (in->size() != index.file_size)
      return bad_input(display, "file size",
                       fmt::format("is {} bytes but the header was read from a file of {} bytes "
                                   "(file changed?)",
                                   in->size(), index.file_size));
    return load_tensor(*e, display, [&](std::span<std::byte> out) {
      return in->read_at(index.data_start + e->begin, out);
    });
  } catch (const std::exception& e) {
    return bad_input(display, printable(name),
                     fmt::format("cannot hold the tensor ({})", e.what()));
  }
}

}  // namespace ws1
