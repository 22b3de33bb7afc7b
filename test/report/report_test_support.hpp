// Shared by the report tests: synthetic evidence whose cells follow the runners' shapes (ids,
// tiers, transforms), so the writers can be checked without running any op.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "ws1/evidence.hpp"

namespace ws1::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != 0 ? base : "/tmp") + "/ws1-report-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A green accuracy cell of `op` on fixture `<op>/<tier>/<dist>` with one tensor "y" whose
// worst element uses `margin` of its allowance (violating above 1; the cell is then red).
Cell accuracy_cell(const std::string& profile, const std::string& op, Judgment j,
                   const std::string& tier, const std::string& dist, double margin = 0.25);

// An invariance cell of `op` under `transform`: green (bits equal), red (one mismatch), or N/A.
Cell invariance_cell(const std::string& profile, const std::string& op, Judgment j,
                     const std::string& transform, Verdict v);

// Every op of the catalogue on `profile`: accuracy on short and primary (two fixtures each)
// and invariance under BN/chunked and B1/full (green) and tp2 (N/A), all green otherwise.
Evidence full_green_evidence(const std::vector<std::string>& profiles);

// The op names of the catalogue, in its order.
std::vector<std::string> catalogue_op_names();

}  // namespace ws1::test
