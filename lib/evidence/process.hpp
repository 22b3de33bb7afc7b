// Runs a program and captures its standard output, without a shell (argv is passed as is).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ws1::evidence_detail {

struct ProcessOutput {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;     // standard output (standard error is discarded)
};

// Looks argv[0] up on PATH. Absent when the program cannot be started at all.
// Git's repository-locating variables (GIT_DIR, GIT_WORK_TREE, ...) are removed from the
// child's environment so it inspects the directory given on its command line, and
// GIT_OPTIONAL_LOCKS=0 keeps `git status` from writing to the index.
std::optional<ProcessOutput> run_capture(const std::vector<std::string>& argv);

}  // namespace ws1::evidence_detail
