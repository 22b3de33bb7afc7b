// Internal: one worker process of the exec backend, spoken to in lines with deadlines.
//
// The worker runs as `/bin/sh -c COMMAND` in its own process group (so a time-out stops the
// shell and everything it started). Its stdin is one end of a socket pair (a write to a worker
// that has gone fails with EPIPE instead of raising SIGPIPE in ws1check), its stdout and stderr
// are pipes. Every wait polls stdout and stderr together, so a worker that writes much on
// stderr never blocks on it; the last few KiB of stderr are kept to quote in errors. No call
// waits past its deadline, and ending the process is bounded too (a process stuck in the
// kernel is left behind rather than waited for).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ws1/error.hpp"

namespace ws1::exec {

using Clock = std::chrono::steady_clock;

class WorkerProcess {
 public:
  // Errors carry only a `problem`; the caller says whose worker it is.
  static Result<std::unique_ptr<WorkerProcess>> start(const std::string& command);
  ~WorkerProcess();  // finish() with a short grace period, if still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Writes `line` and a '\n' to the worker's stdin.
  Status send_line(const std::string& line, Clock::time_point deadline);
  // The next line on the worker's stdout, without its '\n'. Fails on end of file (the worker
  // closed stdout or exited), past kMaxLineBytes, or at the deadline (problem: kTimedOut).
  Result<std::string> read_line(Clock::time_point deadline);

  // Closes the worker's stdin (its cue to exit), waits up to `grace` for it to exit, else
  // terminates its process group (SIGTERM, then SIGKILL); then kills what is left of the group.
  void finish(std::chrono::milliseconds grace);
  // Stops the process group at once (SIGKILL), the worker itself gone or not.
  void kill();

  // "exited with status 3", "killed by signal 9", "still running".
  std::string state();
  // The end of what the worker wrote on stderr, as `; its stderr ends: "..."`, or "".
  std::string stderr_note() const;

  static constexpr std::size_t kMaxLineBytes = 1 << 20;
  static constexpr std::string_view kTimedOut = "time-out";

 private:
  WorkerProcess() = default;
  // Reads what stderr holds now (never blocks).
  void drain_stderr();
  // Waits up to `wait` for the process to exit (reaping it), draining its output meanwhile.
  bool reap_within(std::chrono::milliseconds wait);
  void signal_group(int sig);
  void close_fd(int& fd);

  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  std::string out_buffer_;
  bool out_eof_ = false;
  std::string err_tail_;
  std::optional<int> wait_status_;  // set once reaped
};

}  // namespace ws1::exec
