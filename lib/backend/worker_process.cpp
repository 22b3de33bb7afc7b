#include "worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace ws1::exec {
namespace {

constexpr std::size_t kStderrKept = 4096;  // bytes of stderr kept for error messages
constexpr std::size_t kStderrQuoted = 300;  // characters of it quoted in one error line

Error failure(std::string problem) { return Error{"", "", std::move(problem), ExitCode::kEnvironment}; }

std::string errno_text(int e) { return std::strerror(e); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Owns the spawn attributes, file actions and the child's ends of the channels until the
// child has them.
struct Spawn {
  posix_spawnattr_t attr{};
  posix_spawn_file_actions_t actions{};
  bool attr_ok = false, actions_ok = false;
  std::array<int, 2> in{-1, -1}, out{-1, -1}, err{-1, -1};  // [parent, child] for in
  ~Spawn() {
    if (attr_ok) posix_spawnattr_destroy(&attr);
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::start(const std::string& command) {
  Spawn s;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s.in.data()) != 0 ||
      pipe2(s.out.data(), O_CLOEXEC) != 0 || pipe2(s.err.data(), O_CLOEXEC) != 0)
    return failure("cannot create the worker's channels: " + errno_text(errno));
  s.actions_ok = posix_spawn_file_actions_init(&s.actions) == 0;
  s.attr_ok = posix_spawnattr_init(&s.attr) == 0;
  if (!s.actions_ok || !s.attr_ok) return failure("cannot prepare the worker's start");
  // The child gets the socket's second end as stdin and the pipes' write ends as stdout/stderr;
  // every other descriptor of ours is close-on-exec.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  if (posix_spawn_file_actions_adddup2(&s.actions, s.in[1], STDIN_FILENO) != 0 ||
      posix_spawn_file_actions_adddup2(&s.actions, s.out[1], STDOUT_FILENO) != 0 ||
      posix_spawn_file_actions_adddup2(&s.actions, s.err[1], STDERR_FILENO) != 0 ||
      posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF) != 0 ||
      posix_spawnattr_setpgroup(&s.attr, 0) != 0 || posix_spawnattr_setsigmask(&s.attr, &none) != 0 ||
      posix_spawnattr_setsigdefault(&s.attr, &defaults) != 0)
    return failure("cannot prepare the worker's start");

  std::string sh = "sh", dash_c = "-c", cmd = command;
  std::array<char*, 4> argv{sh.data(), dash_c.data(), cmd.data(), nullptr};
  auto w = std::unique_ptr<WorkerProcess>(new WorkerProcess());
  if (int e = posix_spawn(&w->pid_, "/bin/sh", &s.actions, &s.attr, argv.data(), environ); e != 0)
    return failure("cannot start /bin/sh: " + errno_text(e));
  w->in_fd_ = std::exchange(s.in[0], -1);
  w->out_fd_ = std::exchange(s.out[0], -1);
  w->err_fd_ = std::exchange(s.err[0], -1);
  set_nonblocking(w->out_fd_);
  set_nonblocking(w->err_fd_);
  return w;
}

WorkerProcess::~WorkerProcess() {
  if (!wait_status_ && pid_ > 0) finish(std::chrono::milliseconds(2000));
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
}

void WorkerProcess::close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

Status WorkerProcess::send_line(const std::string& line, Clock::time_point deadline) {
  const std::string data = line + "\n";
  std::size_t sent = 0;
  while (sent < data.size()) {
    if (in_fd_ < 0) return failure("the worker's stdin is closed");
    const ssize_t n = send(in_fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int wait = remaining_ms(deadline);
      if (wait == 0) return failure("the worker did not read its stdin before the time-out");
      std::array<pollfd, 2> fds{{{in_fd_, POLLOUT, 0}, {err_fd_, POLLIN, 0}}};
      if (poll(fds.data(), fds.size(), wait) > 0 && fds[1].revents != 0) drain_stderr();
      continue;
    }
    reap_within(std::chrono::milliseconds(2000));  // it is exiting: say how it ended
    return failure(fmt::format("the worker no longer reads its stdin ({})", state()));
  }
  return {};
}

Result<std::string> WorkerProcess::read_line(Clock::time_point deadline) {
  for (;;) {
    if (auto nl = out_buffer_.find('\n'); nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      return line;
    }
    if (out_buffer_.size() > kMaxLineBytes)
      return failure(fmt::format("a line of more than {} bytes on its stdout", kMaxLineBytes));
    if (out_eof_) {
      reap_within(std::chrono::milliseconds(2000));
      return failure(fmt::format("the worker closed its stdout ({})", state()));
    }
    const int wait = remaining_ms(deadline);
    if (wait == 0) return failure(std::string(kTimedOut));
    std::array<pollfd, 2> fds{{{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}}};
    const int ready = poll(fds.data(), fds.size(), wait);
    if (ready < 0 && errno != EINTR) return failure("cannot wait for the worker: " + errno_text(errno));
    if (ready <= 0) continue;
    if (fds[1].revents != 0) drain_stderr();
    if (fds[0].revents == 0) continue;
    std::array<char, 65536> buf{};
    const ssize_t n = read(out_fd_, buf.data(), buf.size());
    if (n > 0) out_buffer_.append(buf.data(), static_cast<std::size_t>(n));
    if (n == 0) out_eof_ = true;
    if (n < 0 && errno != EAGAIN && errno != EINTR) out_eof_ = true;
  }
}

void WorkerProcess::drain_stderr() {
  std::array<char, 8192> buf{};
  while (err_fd_ >= 0) {
    const ssize_t n = read(err_fd_, buf.data(), buf.size());
    if (n > 0) {
      err_tail_.append(buf.data(), static_cast<std::size_t>(n));
      if (err_tail_.size() > kStderrKept) err_tail_.erase(0, err_tail_.size() - kStderrKept);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) close_fd(err_fd_);
    return;
  }
}

bool WorkerProcess::reap_within(std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  while (!wait_status_ && pid_ > 0) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) wait_status_ = status;
    if (r < 0 && errno != EINTR) wait_status_ = -1;  // not our child any more: nothing to wait for
    if (wait_status_ || Clock::now() >= deadline) break;
    // Keep its pipes flowing so a worker writing on its way out does not block on them.
    drain_stderr();
    if (out_fd_ >= 0) {
      std::array<char, 65536> buf{};
      while (read(out_fd_, buf.data(), buf.size()) > 0) {
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drain_stderr();
  return wait_status_.has_value();
}

void WorkerProcess::signal_group(int sig) {
  if (pid_ > 0 && !wait_status_) ::kill(-pid_, sig);
}

void WorkerProcess::finish(std::chrono::milliseconds grace) {
  close_fd(in_fd_);
  if (!reap_within(grace)) {
    signal_group(SIGTERM);
    reap_within(std::chrono::milliseconds(1000));
  }
  kill();  // whatever is left of its group
}

void WorkerProcess::kill() {
  // The whole group, even when the worker itself is gone: what it started (a wrapper's own
  // worker) must not outlive it. The group id stays reserved while any member lives.
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
  reap_within(std::chrono::milliseconds(5000));
  close_fd(in_fd_);
}

std::string WorkerProcess::state() {
  if (!wait_status_) reap_within(std::chrono::milliseconds(0));
  if (!wait_status_) return "still running";
  const int s = *wait_status_;
  if (s == -1) return "exited";
  if (WIFEXITED(s)) return fmt::format("exited with status {}", WEXITSTATUS(s));
  if (WIFSIGNALED(s)) return fmt::format("killed by signal {}", WTERMSIG(s));
  return "stopped";
}

std::string WorkerProcess::stderr_note() const {
  // The last lines, joined into one line; control characters become spaces.
  std::string text;
  // ASCII only: the reason ends up in JSON evidence, and stderr may hold any bytes.
  for (char c : err_tail_) {
    const auto u = static_cast<unsigned char>(c);
    text += u >= 0x80 ? '?' : (u < 0x20 && c != '\n') ? ' ' : c;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string joined;
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', start);
    std::string part = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (part.find_first_not_of(' ') != std::string::npos)
      joined += (joined.empty() ? "" : " | ") + part;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (joined.empty()) return "";
  if (joined.size() > kStderrQuoted) joined = "..." + joined.substr(joined.size() - kStderrQuoted);
  return fmt::format("; its stderr ends: \"{}\"", joined);
}

}  // namespace ws1::exec
