// Environment readback: host and build fields, UTC time, and the git checkout state read at
// run time in a throwaway repository.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>

#include "evidence_test_support.hpp"
#include "host_parse.hpp"
#include "process.hpp"
#include "ws1/build_info.hpp"
#include "ws1/environment.hpp"

namespace {

namespace fs = std::filesystem;
using ws1::evidence_detail::cpuinfo_model;
using ws1::evidence_detail::git_commit_from_output;
using ws1::evidence_detail::os_release_pretty_name;
using ws1::evidence_detail::run_capture;

// Runs a test-setup command (paths come from mkdtemp: no quoting issues).
void sh(const std::string& cmd) {
  INFO(cmd);
  REQUIRE(std::system((cmd + " >/dev/null 2>&1").c_str()) == 0);
}

std::string git_head(const fs::path& repo) {
  FILE* p = popen(("git -C '" + repo.string() + "' rev-parse HEAD").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[128] = {};
  const std::size_t n = fread(buf, 1, sizeof buf - 1, p);
  pclose(p);
  std::string s(buf, n);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Sets an environment variable for the scope, restoring the old value afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("environment: host and build fields are filled", "[evidence]") {
  const ws1::Environment env = ws1::read_environment();
  CHECK_FALSE(env.host.hostname.empty());
  CHECK(env.host.hostname != "unknown");
  CHECK_FALSE(env.host.os.empty());
  CHECK(env.host.kernel.rfind("Linux ", 0) == 0);
  CHECK_FALSE(env.host.arch.empty());
  CHECK_FALSE(env.host.cpu_model.empty());
  CHECK(env.host.logical_cores > 0);
  CHECK(env.host.memory_total_bytes > 0);
  CHECK_FALSE(env.compiler.empty());
  CHECK(env.compiler == ws1::build_info().compiler);
  CHECK_FALSE(env.build_type.empty());
  CHECK(env.built_with_cuda == ws1::build_info().cuda);
  CHECK(env.autocast == "not applicable to this runtime");
  CHECK_FALSE(env.gpu.has_value());
  CHECK_FALSE(env.gpu_absent_reason.empty());
  CHECK(env.backend == "cpu_bf16");
  CHECK(std::regex_match(env.captured_at,
                         std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")));
}

TEST_CASE("environment: the OS matches /etc/os-release when present", "[evidence]") {
  std::ifstream in("/etc/os-release");
  if (!in) return;
  std::string line, expected;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) expected = line.substr(12);
  if (expected.size() >= 2 && expected.front() == '"') expected = expected.substr(1, expected.size() - 2);
  CHECK(ws1::read_host().os == expected);
}

TEST_CASE("environment: UTC ISO 8601 formatting", "[evidence]") {
  using namespace std::chrono;
  CHECK(ws1::utc_iso8601(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
  // 2026-11-30T12:34:56.789Z
  const auto t = system_clock::time_point{seconds{1796042096} + milliseconds{789}};
  CHECK(ws1::utc_iso8601(t) == "2026-11-30T12:34:56.789Z");
  CHECK(ws1::utc_iso8601(system_clock::time_point{milliseconds{-1}}) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("environment: CUDA and cuBLAS version strings", "[evidence]") {
  CHECK(ws1::cuda_version_string(13000) == "13.0");
  CHECK(ws1::cuda_version_string(12080) == "12.8");
  CHECK(ws1::cublas_version_string(130100) == "13.1.0");
  CHECK(ws1::cublas_version_string(120804) == "12.8.4");
}

TEST_CASE("environment: os-release and cpuinfo parsing", "[evidence]") {
  CHECK(os_release_pretty_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n") ==
        "Debian GNU/Linux 12 (bookworm)");
  CHECK(os_release_pretty_name("PRETTY_NAME='Single quoted'") == "Single quoted");
  CHECK(os_release_pretty_name("PRETTY_NAME=Bare") == "Bare");
  CHECK(os_release_pretty_name("PRETTY_NAME=\"With \\\"escape\\\"\"") == "With \"escape\"");
  CHECK_FALSE(os_release_pretty_name("NAME=x\nXPRETTY_NAME=y\n").has_value());
  CHECK_FALSE(os_release_pretty_name("PRETTY_NAME=\"\"").has_value());

  CHECK(cpuinfo_model("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\n"
                      "model name\t: AMD EPYC 9654 96-Core Processor\n") ==
        "AMD EPYC 9654 96-Core Processor");
  // "model" (a number on x86) is not "model name"; ARM spells it differently.
  CHECK(cpuinfo_model("processor : 0\nBogoMIPS : 50.00\nCPU part : 0xd4f\n"
                      "Hardware : NVIDIA Grace\n") == "NVIDIA Grace");
  CHECK_FALSE(cpuinfo_model("processor : 0\nmodel : 17\n").has_value());
}

TEST_CASE("environment: git output parsing", "[evidence]") {
  const std::string sha1(40, 'f'), sha256(64, '0');
  CHECK(git_commit_from_output(sha1 + "\n") == sha1);
  CHECK(git_commit_from_output(sha256 + "\n") == sha256);
  CHECK_FALSE(git_commit_from_output("HEAD\n").has_value());
  CHECK_FALSE(git_commit_from_output(std::string(39, 'a') + "\n").has_value());
  CHECK_FALSE(git_commit_from_output(std::string(40, 'A')).has_value());
  CHECK_FALSE(git_commit_from_output("").has_value());
}

TEST_CASE("environment: process capture runs argv without a shell", "[evidence]") {
  auto out = run_capture({"printf", "%s|", "a b", "$(echo injected)", ";ls"});
  REQUIRE(out.has_value());
  CHECK(out->exit_code == 0);
  CHECK(out->out == "a b|$(echo injected)|;ls|");
  auto fail = run_capture({"sh", "-c", "exit 3"});
  REQUIRE(fail.has_value());
  CHECK(fail->exit_code == 3);
  CHECK_FALSE(run_capture({"ws1-no-such-program-7f3a"}).has_value());
  CHECK_FALSE(run_capture({}).has_value());
}

TEST_CASE("environment: checkout state of a git repository", "[evidence]") {
  ws1::test::TempDir tmp;
  const fs::path repo = tmp.path() / "repo";
  fs::create_directory(repo);
  // Keep git from walking up out of the temp dir into some enclosing checkout.
  ScopedEnv ceiling("GIT_CEILING_DIRECTORIES", tmp.path().c_str());

  SECTION("not a checkout: absent, not an error") {
    CHECK_FALSE(ws1::read_checkout(repo).has_value());
    CHECK_FALSE(ws1::read_checkout(tmp.path() / "does-not-exist").has_value());
  }
  SECTION("a repository without commits: absent") {
    sh("git init -q '" + repo.string() + "'");
    CHECK_FALSE(ws1::read_checkout(repo).has_value());
  }
  SECTION("clean, then dirty") {
    const std::string g = "git -C '" + repo.string() + "' -c user.name=ws1 -c user.email=ws1@invalid ";
    sh("git init -q '" + repo.string() + "'");
    { std::ofstream(repo / "tracked.txt") << "one\n"; }
    fs::create_directory(repo / "sub");
    { std::ofstream(repo / "sub" / "b.txt") << "b\n"; }
    sh(g + "add tracked.txt sub/b.txt");
    sh(g + "commit -q -m init");
    const std::string head = git_head(repo);
    REQUIRE(head.size() == 40);

    auto clean = ws1::read_checkout(repo);
    REQUIRE(clean.has_value());
    CHECK(clean->commit == head);
    CHECK_FALSE(clean->dirty);

    // From a subdirectory: the same checkout.
    auto sub = ws1::read_checkout(repo / "sub");
    REQUIRE(sub.has_value());
    CHECK(sub->commit == head);

    // Untracked files do not make it dirty.
    { std::ofstream(repo / "untracked.txt") << "u\n"; }
    auto untracked = ws1::read_checkout(repo);
    REQUIRE(untracked.has_value());
    CHECK_FALSE(untracked->dirty);

    // A modified tracked file does.
    { std::ofstream(repo / "tracked.txt") << "two\n"; }
    auto dirty = ws1::read_checkout(repo);
    REQUIRE(dirty.has_value());
    CHECK(dirty->commit == head);
    CHECK(dirty->dirty);

    // A GIT_DIR pointing elsewhere does not redirect the readback.
    ScopedEnv git_dir("GIT_DIR", (tmp.path() / "nowhere").c_str());
    auto redirected = ws1::read_checkout(repo);
    REQUIRE(redirected.has_value());
    CHECK(redirected->commit == head);
  }
  SECTION("git not on PATH: absent") {
    sh("git init -q '" + repo.string() + "'");
    ScopedEnv path("PATH", (tmp.path() / "empty-bin").c_str());
    CHECK_FALSE(ws1::read_checkout(repo).has_value());
  }
}

TEST_CASE("environment: begin_evidence fills tool, environment, start time", "[evidence]") {
  const ws1::Evidence e = ws1::begin_evidence({"ws1check", "env"});
  CHECK(e.schema_version == "ws1check-evidence-v6");
  CHECK(e.tool.name == "ws1check");
  CHECK(e.tool.version == ws1::build_info().version);
  CHECK(e.tool.source_commit == ws1::build_info().source_commit);
  CHECK(e.command == std::vector<std::string>{"ws1check", "env"});
  CHECK(e.started == e.environment.captured_at);
  CHECK_FALSE(e.environment.host.hostname.empty());
}
