// A fresh private directory for one test (mkdtemp under the system's temporary directory),
// removed with everything in it when the test's scope ends.
#pragma once

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace ws1::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(std::string_view prefix = "ws1-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(std::string_view name) const { return (path / name).string(); }
};

}  // namespace ws1::test
