#include "ws1/environment.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "host_parse.hpp"
#include "ws1/build_info.hpp"

namespace ws1 {
namespace {

constexpr const char* kUnknown = "unknown";

std::optional<std::string> slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string os_name() {
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"})
    if (auto text = slurp(path))
      if (auto name = evidence_detail::os_release_pretty_name(*text)) return *name;
  return kUnknown;
}

}  // namespace

HostInfo read_host() {
  HostInfo h;
  std::array<char, 256> name{};
  h.hostname = gethostname(name.data(), name.size() - 1) == 0 && name[0] ? name.data() : kUnknown;
  h.os = os_name();
  utsname u{};
  if (uname(&u) == 0) {
    h.kernel = std::string(u.sysname) + " " + u.release;
    h.arch = u.machine;
  } else {
    h.kernel = h.arch = kUnknown;
  }
  const auto cpuinfo = slurp("/proc/cpuinfo");
  const auto model = cpuinfo ? evidence_detail::cpuinfo_model(*cpuinfo) : std::nullopt;
  h.cpu_model = model ? *model : kUnknown;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  h.logical_cores = cores > 0 ? static_cast<int>(cores) : 0;
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  h.memory_total_bytes =
      pages > 0 && page_size > 0 ? static_cast<std::int64_t>(pages) * page_size : 0;
  return h;
}

Environment read_environment() {
  Environment env;
  env.host = read_host();
  const BuildInfo& b = build_info();
  env.compiler = b.compiler;
  env.build_type = b.build_type;
  env.built_with_cuda = b.cuda;
  env.backend = "cpu_bf16";
  env.gpu_absent_reason = b.cuda ? "GPU not queried" : "built without CUDA";
  env.captured_at = utc_now_iso8601();
  return env;
}

std::string utc_iso8601(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch());
  // Floor division so times before 1970 still get a millisecond part in [0, 1000).
  auto secs = duration_cast<seconds>(ms);
  if (secs > ms) secs -= seconds(1);
  const auto millis = (ms - secs).count();
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  if (gmtime_r(&tt, &tm) == nullptr) return kUnknown;
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

std::string utc_now_iso8601() { return utc_iso8601(std::chrono::system_clock::now()); }

std::string cuda_version_string(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::string cublas_version_string(int version) {
  return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
}

}  // namespace ws1
