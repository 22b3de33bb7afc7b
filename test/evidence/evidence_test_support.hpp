// Shared by the evidence tests: a temporary directory, a complete sample artifact, and a
// reader for the explicit non-finite encoding.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "ws1/evidence.hpp"

namespace ws1::test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ws1-evidence-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) FAIL("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A complete artifact: a green accuracy cell, a red bitwise cell, an N/A cell and a green
// chain-parity cell, with awkward doubles in the value fields.
Evidence sample_evidence();

// Reads a float field written by the evidence writer: a number, or "nan" / "inf" / "-inf".
double read_float(simdjson::dom::element e);

// Names of the entries of a directory.
std::vector<std::string> dir_entries(const std::filesystem::path& dir);

}  // namespace ws1::test
