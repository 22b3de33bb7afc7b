// Atomic writing: the target is complete or absent, no temporary file survives, errors name
// the path.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "evidence_test_support.hpp"

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool mentions(const ws1::Error& e, const std::filesystem::path& p) {
  return e.message().find(p.string()) != std::string::npos;
}

}  // namespace

TEST_CASE("atomic write: writes, replaces, leaves no temporary file", "[evidence]") {
  ws1::test::TempDir tmp;
  const auto target = tmp.path() / "a.json";
  REQUIRE(ws1::write_file_atomic(target, "first").ok());
  CHECK(slurp(target) == "first");
  REQUIRE(ws1::write_file_atomic(target, std::string(1 << 20, 'x')).ok());
  CHECK(slurp(target) == std::string(1 << 20, 'x'));
  CHECK(ws1::test::dir_entries(tmp.path()) == std::vector<std::string>{"a.json"});
  struct stat st{};
  REQUIRE(stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
}

TEST_CASE("atomic write: a directory in the way is an error naming the path", "[evidence]") {
  ws1::test::TempDir tmp;
  const auto target = tmp.path() / "gate.json";
  std::filesystem::create_directory(target);
  std::filesystem::create_directory(target / "inside");
  const ws1::Status st = ws1::write_file_atomic(target, "content");
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message());
  CHECK(mentions(st.error(), target));
  CHECK(st.error().file == target.string());
  // The directory is untouched and no temporary file is left beside it.
  CHECK(std::filesystem::is_directory(target / "inside"));
  CHECK(ws1::test::dir_entries(tmp.path()) == std::vector<std::string>{"gate.json"});

  // Same through write_evidence.
  auto written = ws1::write_evidence(ws1::test::sample_evidence(), tmp.path(), "gate");
  REQUIRE_FALSE(written.ok());
  CHECK(mentions(written.error(), target));
  CHECK(ws1::test::dir_entries(tmp.path()) == std::vector<std::string>{"gate.json"});
}

TEST_CASE("atomic write: an unwritable directory is an error naming the path", "[evidence]") {
  SECTION("read-only directory (permissions; root bypasses them)") {
    if (geteuid() == 0) {
      WARN("running as root: permission bits do not stop writes; checked on /proc instead");
      return;
    }
    ws1::test::TempDir tmp;
    const auto dir = tmp.path() / "ro";
    std::filesystem::create_directory(dir);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_read |
                                          std::filesystem::perms::owner_exec);
    const ws1::Status st = ws1::write_file_atomic(dir / "x.json", "content");
    REQUIRE_FALSE(st.ok());
    INFO(st.error().message());
    CHECK(mentions(st.error(), dir / "x.json"));
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
    CHECK(ws1::test::dir_entries(dir).empty());
  }
  SECTION("a directory no one can create files in (/proc/self)") {
    if (!std::filesystem::is_directory("/proc/self")) return;
    const std::filesystem::path target = "/proc/self/ws1-evidence.json";
    const ws1::Status st = ws1::write_file_atomic(target, "content");
    REQUIRE_FALSE(st.ok());
    INFO(st.error().message());
    CHECK(mentions(st.error(), target));
    CHECK_FALSE(std::filesystem::exists(target));
  }
}

TEST_CASE("write_evidence: creates the output directory, names the file", "[evidence]") {
  ws1::test::TempDir tmp;
  const auto out = tmp.path() / "a" / "b";
  auto written = ws1::write_evidence(ws1::test::sample_evidence(), out, "accuracy-rms_norm");
  REQUIRE(written.ok());
  CHECK(*written == out / "accuracy-rms_norm.json");
  CHECK(ws1::test::dir_entries(out) == std::vector<std::string>{"accuracy-rms_norm.json"});
}

TEST_CASE("write_evidence: bad output locations and names are errors", "[evidence]") {
  ws1::test::TempDir tmp;
  {
    std::ofstream(tmp.path() / "file") << "x";
  }
  SECTION("out_dir below a regular file") {
    const auto out = tmp.path() / "file" / "sub";
    auto written = ws1::write_evidence(ws1::test::sample_evidence(), out, "gate");
    REQUIRE_FALSE(written.ok());
    INFO(written.error().message());
    CHECK(mentions(written.error(), out));
  }
  SECTION("out_dir is a regular file") {
    const auto out = tmp.path() / "file";
    auto written = ws1::write_evidence(ws1::test::sample_evidence(), out, "gate");
    REQUIRE_FALSE(written.ok());
    INFO(written.error().message());
    CHECK(mentions(written.error(), out));
  }
  SECTION("name with a path separator") {
    auto written = ws1::write_evidence(ws1::test::sample_evidence(), tmp.path(), "../escape");
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().problem.find("plain file name") != std::string::npos);
  }
  SECTION("empty name") {
    auto written = ws1::write_evidence(ws1::test::sample_evidence(), tmp.path(), "");
    REQUIRE_FALSE(written.ok());
  }
  SECTION("invalid evidence writes nothing and names file and field") {
    ws1::Evidence e = ws1::test::sample_evidence();
    e.cells[2].reason.clear();
    const auto out = tmp.path() / "out";
    auto written = ws1::write_evidence(e, out, "gate");
    REQUIRE_FALSE(written.ok());
    CHECK(written.error().file == (out / "gate.json").string());
    CHECK(written.error().where == "cells[2].reason");
    CHECK_FALSE(std::filesystem::exists(out));
  }
  CHECK(ws1::test::dir_entries(tmp.path()) == std::vector<std::string>{"file"});
}
