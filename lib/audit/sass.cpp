// TF32 tensor-core instructions in the shipped SASS (spec §9.7, DESIGN §3.6): `cuobjdump -sass`
// on the binary, its listing read line by line.
//
// Listing lines (cuobjdump 12/13):
//     code for sm_90
//         Function : _Z6kernelPfS_
//         /*0050*/  @P0 HMMA.1688.F32.TF32 R4, R8, R12, R4 ;   /* 0x... */
//                                                              /* 0x... */
// TF32 MMA opcodes: HMMA.1684.F32.TF32 and HMMA.1688.F32.TF32 (mma.sync / wmma with .tf32
// operands, sm_80+), HGMMA.64xNx8.F32.TF32 (sm_90 wgmma.mma_async ... .f32.tf32.tf32).
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <system_error>

#include "ws1/audit.hpp"

extern char** environ;

namespace ws1 {
namespace fs = std::filesystem;
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

// The instruction of a listing line "/*0050*/  @P0 HMMA... ;  /* 0x... */", or empty.
std::string_view instruction_of(std::string_view line) {
  std::string_view s = trim(line);
  if (s.substr(0, 2) != "/*") return {};
  const std::size_t close = s.find("*/");
  if (close == std::string_view::npos) return {};
  const std::string_view addr = s.substr(2, close - 2);
  if (addr.empty()) return {};
  for (char c : addr)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return {};  // "/* 0x... */": encoding
  s = trim(s.substr(close + 2));
  const std::size_t semi = s.find(';');
  if (semi != std::string_view::npos) s = s.substr(0, semi);
  s = trim(s);
  if (!s.empty() && s.front() == '{') s = trim(s.substr(1));  // dual-issue braces (older SASS)
  return s;
}

std::string_view opcode_of(std::string_view instruction) {
  std::string_view s = instruction;
  if (!s.empty() && s.front() == '@') {  // predicate guard: @P0, @!PT
    const std::size_t sp = s.find_first_of(" \t");
    if (sp == std::string_view::npos) return {};
    s = trim(s.substr(sp));
  }
  const std::size_t sp = s.find_first_of(" \t");
  return sp == std::string_view::npos ? s : s.substr(0, sp);
}

}  // namespace

bool is_tf32_mma(std::string_view opcode) {
  const std::string op = upper(opcode);
  const std::size_t dot = op.find('.');
  const std::string base = op.substr(0, dot);
  if (base.find("MMA") == std::string::npos || dot == std::string::npos) return false;
  std::size_t b = dot + 1;
  while (b <= op.size()) {
    std::size_t e = op.find('.', b);
    if (e == std::string::npos) e = op.size();
    if (op.compare(b, e - b, "TF32") == 0) return true;
    b = e + 1;
  }
  return false;
}

SassListingScan scan_sass_listing(std::string_view listing) {
  SassListingScan scan;
  std::string function, arch;
  std::int64_t line_no = 0;
  std::size_t pos = 0;
  while (pos <= listing.size()) {
    std::size_t end = listing.find('\n', pos);
    if (end == std::string_view::npos) end = listing.size();
    const std::string_view line = listing.substr(pos, end - pos);
    ++line_no;
    const std::string_view t = trim(line);
    if (t.substr(0, 9) == "code for ") {
      arch = std::string(trim(t.substr(9)));
    } else if (t.substr(0, 8) == "Function") {
      const std::size_t colon = t.find(':');
      if (colon != std::string_view::npos) {
        function = std::string(trim(t.substr(colon + 1)));
        ++scan.functions;
      }
    } else if (const std::string_view ins = instruction_of(line); !ins.empty()) {
      ++scan.instructions;
      if (is_tf32_mma(opcode_of(ins)))
        scan.tf32.push_back({function, arch, line_no, std::string(ins)});
    }
    if (end == listing.size()) break;
    pos = end + 1;
  }
  return scan;
}

std::optional<fs::path> find_cuobjdump() {
  std::error_code ec;
  auto executable = [&](const fs::path& p) {
    return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
  };
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest(path);
    while (true) {
      const std::size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty() && executable(fs::path(dir) / "cuobjdump")) return fs::path(dir) / "cuobjdump";
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  const fs::path cuda = "/usr/local/cuda/bin/cuobjdump";
  if (executable(cuda)) return cuda;
  return std::nullopt;
}

namespace {

struct Captured {
  int exit_code = -1;
  std::string out, err;
  bool too_large = false;
};

// Runs argv (no shell) and captures stdout and stderr in full (up to kMax bytes of stdout;
// past that the listing is refused rather than scanned in part).
std::optional<Captured> run(const std::vector<std::string>& argv, std::string& why) {
  constexpr std::size_t kMax = std::size_t{1} << 30;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out_fd[2] = {-1, -1}, err_fd[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out_fd, err_fd})
      for (int i = 0; i < 2; ++i)
        if (p[i] >= 0) {
          close(p[i]);
          p[i] = -1;
        }
  };
  if (pipe2(out_fd, O_CLOEXEC) != 0 || pipe2(err_fd, O_CLOEXEC) != 0) {
    why = std::string("pipe: ") + std::strerror(errno);
    close_all();
    return std::nullopt;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd[1]);
  out_fd[1] = -1;
  close(err_fd[1]);
  err_fd[1] = -1;
  if (rc != 0) {
    why = fmt::format("cannot start {}: {}", argv[0], std::strerror(rc));
    close_all();
    return std::nullopt;
  }
  Captured c;
  std::array<char, 65536> buf{};
  std::array<pollfd, 2> fds{{{out_fd[0], POLLIN, 0}, {err_fd[0], POLLIN, 0}}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? c.out : c.err;
      if (i == 0 && dst.size() + static_cast<std::size_t>(n) > kMax) c.too_large = true;
      else if (i == 1 && dst.size() > 65536) continue;
      else dst.append(buf.data(), static_cast<std::size_t>(n));
    }
  }
  close_all();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) break;
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return c;
}

std::string first_line(std::string_view s) {
  s = trim(s);
  const std::size_t nl = s.find('\n');
  return std::string(nl == std::string_view::npos ? s : s.substr(0, nl));
}

}  // namespace

SassScan scan_binary_sass(const std::optional<fs::path>& cuobjdump, const fs::path& binary) {
  SassScan s;
  s.binary = binary.string();
  if (!cuobjdump) {
    s.not_run = "cuobjdump not found (PATH, /usr/local/cuda/bin)";
    return s;
  }
  s.tool = cuobjdump->string();
  std::string why;
  const auto c = run({s.tool, "-sass", s.binary}, why);
  if (!c) {
    s.not_run = why;
    return s;
  }
  if (c->too_large) {
    s.not_run = fmt::format("{} -sass {}: listing larger than 1 GiB, not scanned", s.tool, s.binary);
    return s;
  }
  if (c->exit_code != 0) {
    s.not_run = fmt::format("{} -sass {} exited {}: {}", s.tool, s.binary, c->exit_code,
                            first_line(c->err.empty() ? c->out : c->err));
    return s;
  }
  s.listing = scan_sass_listing(c->out);
  s.ran = true;
  return s;
}

}  // namespace ws1
