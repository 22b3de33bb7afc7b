#include <string>
#include <vector>

#include "host_parse.hpp"
#include "process.hpp"
#include "ws1/environment.hpp"

namespace ws1 {

std::optional<Checkout> read_checkout(const std::filesystem::path& dir) {
  using evidence_detail::run_capture;
  const std::string d = dir.string();
  const auto head = run_capture({"git", "-C", d, "rev-parse", "--verify", "HEAD"});
  if (!head || head->exit_code != 0) return std::nullopt;  // no git, no checkout, no commit
  auto commit = evidence_detail::git_commit_from_output(head->out);
  if (!commit) return std::nullopt;
  // Fails in a bare repository or inside .git: no work tree, so no checkout to describe.
  const auto status =
      run_capture({"git", "-C", d, "status", "--porcelain", "--untracked-files=no"});
  if (!status || status->exit_code != 0) return std::nullopt;
  return Checkout{std::move(*commit), !status->out.empty()};
}

}  // namespace ws1
