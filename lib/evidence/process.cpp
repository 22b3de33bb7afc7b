#include "process.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <string_view>

extern char** environ;

namespace ws1::evidence_detail {
namespace {

bool drop_from_env(std::string_view entry) {
  static constexpr std::array<std::string_view, 9> names = {
      "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
      "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_OPTIONAL_LOCKS"};
  const std::string_view name = entry.substr(0, entry.find('='));
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

// Owns the file actions object and the pipe ends so every exit path releases them.
struct SpawnResources {
  posix_spawn_file_actions_t actions{};
  bool actions_ok = false;
  int fds[2] = {-1, -1};
  ~SpawnResources() {
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
};

}  // namespace

std::optional<ProcessOutput> run_capture(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e)
    if (!drop_from_env(*e)) env_store.emplace_back(*e);
  env_store.emplace_back("GIT_OPTIONAL_LOCKS=0");
  std::vector<char*> env;
  for (std::string& e : env_store) env.push_back(e.data());
  env.push_back(nullptr);

  SpawnResources r;
  if (pipe2(r.fds, O_CLOEXEC) != 0) return std::nullopt;
  if (posix_spawn_file_actions_init(&r.actions) != 0) return std::nullopt;
  r.actions_ok = true;
  // The child's stdout is the pipe; stdin and stderr are /dev/null (git's complaints about a
  // non-checkout are expected and not ours to print).
  if (posix_spawn_file_actions_adddup2(&r.actions, r.fds[1], STDOUT_FILENO) != 0 ||
      posix_spawn_file_actions_addopen(&r.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0) != 0 ||
      posix_spawn_file_actions_addopen(&r.actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0) != 0)
    return std::nullopt;

  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &r.actions, nullptr, args.data(), env.data()) != 0)
    return std::nullopt;
  close(r.fds[1]);
  r.fds[1] = -1;

  ProcessOutput result;
  std::array<char, 4096> buf{};
  constexpr std::size_t kMaxKept = 1 << 20;  // keep the start; drain the rest so git finishes
  for (;;) {
    const ssize_t n = read(r.fds[0], buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.out.size() < kMaxKept) result.out.append(buf.data(), static_cast<std::size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  // posix_spawnp reports a missing program as exit status 127 on glibc.
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code == 127) return std::nullopt;
  }
  return result;
}

}  // namespace ws1::evidence_detail
