// Fuzz target: bytes of a .safetensors file through the reader's three entry points, which must
// agree with each other:
//   parse_safetensors (bytes in memory),
//   read_safetensors and read_safetensors_header + read_safetensors_tensor (a file: the bytes
//   are written to a per-process temporary file first; `--inputs FILE`, the exec protocol's
//   tensor files and the model loader take these paths).
// Accepted, the memory and file readers must give the same tensors, and a failure the same
// Error; the header-only reader must accept whatever the full reader accepts. An accepted file
// is written back with serialize_safetensors and must read back to the same tensors.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "ws1/safetensors.hpp"

namespace {

// The file this process writes each input to, for the path-based readers: created in $TMPDIR
// (else /tmp) and unlinked at once, so that nothing is left behind however the process ends
// (libFuzzer does not run atexit handlers); the readers open it as /proc/self/fd/N.
class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string name = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") +
                       "/ws1check-fuzz-safetensors-XXXXXX";
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) fail("cannot create the temporary file");
    ::unlink(name.c_str());
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& path() const { return path_; }
  void write(const std::uint8_t* data, std::size_t size) const {
    if (::ftruncate(fd_, 0) != 0) fail("cannot truncate the temporary file");
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("cannot write the temporary file");
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
};

[[noreturn]] void mismatch(const char* what) {
  std::fprintf(stderr, "safetensors_fuzz: %s\n", what);
  std::abort();
}

bool same_error(const ws1::Error& a, const ws1::Error& b) {
  return a.file == b.file && a.where == b.where && a.problem == b.problem && a.code == b.code;
}

bool same_tensor(const ws1::Tensor& a, const ws1::Tensor& b) {
  const auto x = a.bytes(), y = b.bytes();
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::equal(x.begin(), x.end(), y.begin(), y.end());
}

bool same_file(const ws1::SafetensorsFile& a, const ws1::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    if (a.tensors[i].name != b.tensors[i].name ||
        !same_tensor(a.tensors[i].tensor, b.tensors[i].tensor))
      return false;
  return true;
}

// The same file's tensors in any order (the writer orders them canonically).
bool same_content(const ws1::SafetensorsFile& a, const ws1::SafetensorsFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const ws1::NamedTensor& t : a.tensors) {
    const ws1::Tensor* u = b.find(t.name);
    if (u == nullptr || !same_tensor(t.tensor, *u)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  static const TempFile file;
  file.write(data, size);
  const std::string& path = file.path();
  // The same display name for both, so that their errors compare equal.
  const ws1::Result<ws1::SafetensorsFile> in_memory = ws1::parse_safetensors(bytes, path);
  const ws1::Result<ws1::SafetensorsFile> on_disk = ws1::read_safetensors(path);
  const ws1::Result<ws1::SafetensorsIndex> index = ws1::read_safetensors_header(path);

  if (in_memory.ok() != on_disk.ok()) mismatch("parse_safetensors and read_safetensors disagree");
  if (!in_memory) {
    if (!same_error(in_memory.error(), on_disk.error()))
      mismatch("parse_safetensors and read_safetensors fail differently");
    return 0;
  }
  if (!same_file(*in_memory, *on_disk)) mismatch("parse_safetensors and read_safetensors differ");
  if (!index) mismatch("read_safetensors_header rejects a file read_safetensors accepts");
  if (index->entries.size() != in_memory->tensors.size()) mismatch("header index size differs");
  for (const ws1::NamedTensor& t : in_memory->tensors) {
    ws1::Result<ws1::Tensor> one = ws1::read_safetensors_tensor(path, *index, t.name);
    if (!one || !same_tensor(*one, t.tensor)) mismatch("read_safetensors_tensor differs");
  }

  ws1::Result<std::vector<std::byte>> written =
      ws1::serialize_safetensors(in_memory->tensors, in_memory->metadata);
  if (!written) return 0;  // the writer may refuse names the reader accepts (checked below)
  ws1::Result<ws1::SafetensorsFile> back = ws1::parse_safetensors(*written, "written");
  if (!back) mismatch("the writer's bytes do not read back");
  if (!same_content(*in_memory, *back)) mismatch("the writer's bytes read back differently");
  return 0;
}
