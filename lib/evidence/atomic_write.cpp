// Atomic file writing: readers see either the old file or the complete new one, never a
// prefix, and a failed write leaves nothing behind (DESIGN §8: nothing half-written).
#include <fcntl.h>
#include <sys/stat.h>  // fchmod
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "ws1/evidence.hpp"

namespace ws1 {
namespace {

// A full disk, a quota, a file-size limit or an I/O error is the machine failing, not the input:
// exit 3 like a missing device. Anything else (a bad path, permissions) is bad input, exit 2.
bool environment_errno(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG || err == EIO; }

Error write_error(const std::filesystem::path& path, const std::string& what, int err) {
  Error e = bad_input(path.string(), "", what + ": " + std::strerror(err));
  if (environment_errno(err)) e.code = ExitCode::kEnvironment;
  return e;
}

// Removes the temporary file unless released (after the rename succeeded).
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  int close_fd() {
    const int rc = close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
  int fd_;
};

Status write_all(int fd, std::string_view content, const std::filesystem::path& path) {
  while (!content.empty()) {
    const ssize_t n = write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return write_error(path, "cannot write", n < 0 ? errno : EIO);
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

Status write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  if (path.filename().empty()) return bad_input(path.string(), "", "not a file path");

  const std::filesystem::path dir =
      path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  // Hidden, unique name in the target's directory so rename() stays within one filesystem.
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) return write_error(path, "cannot create a temporary file in " + dir.string(), errno);
  TempFile tmp(tmpl, fd);
  // mkstemp creates 0600; results are for whoever reads them. (Fixed 0644 rather than the
  // umask: reading the umask means setting it, which races with other threads.)
  if (fchmod(tmp.fd(), 0644) != 0) return write_error(path, "cannot set mode", errno);

  if (Status s = write_all(tmp.fd(), content, path); !s) return s;
  if (fsync(tmp.fd()) != 0) return write_error(path, "cannot sync", errno);
  if (tmp.close_fd() != 0) return write_error(path, "cannot close", errno);
  if (rename(tmp.path().c_str(), path.c_str()) != 0)
    return write_error(path, "cannot rename the temporary file into place", errno);
  tmp.release();

  // Make the rename itself durable. The file is complete either way; failure here is ignored.
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return {};
}

Status make_out_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    Error err = bad_input(dir.string(), "", "cannot create the output directory: " + ec.message());
    const bool errno_value = ec.category() == std::generic_category() || ec.category() == std::system_category();
    if (errno_value && environment_errno(ec.value())) err.code = ExitCode::kEnvironment;
    return err;
  }
  if (!std::filesystem::is_directory(dir, ec)) return bad_input(dir.string(), "", "not a directory");
  return {};
}

Result<std::filesystem::path> write_evidence(const Evidence& e,
                                             const std::filesystem::path& out_dir,
                                             std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos)
    return bad_input((out_dir / std::string(name)).string(), "",
                     "artifact name must be a plain file name");
  const std::filesystem::path path = out_dir / (std::string(name) + ".json");
  Result<std::string> text = evidence_json(e, path.string());
  if (!text) return text.error();
  if (Status s = make_out_dir(out_dir); !s) return s.error();
  if (Status s = write_file_atomic(path, *text); !s) return s.error();
  return path;
}

}  // namespace ws1
