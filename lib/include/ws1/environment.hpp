// The software and hardware a run happened on (spec §10 "the complete software and hardware
// environment"; DESIGN §7): host, build, GPU, the git checkout of the working directory, time.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace ws1 {

// Autocast is a PyTorch mechanism; ws1check's kernels never pass through it (DESIGN §7).
inline constexpr std::string_view kAutocastNotApplicable = "not applicable to this runtime";

struct HostInfo {
  std::string hostname;
  std::string os;         // /etc/os-release PRETTY_NAME, e.g. "Debian GNU/Linux 12 (bookworm)"
  std::string kernel;     // uname sysname + release, e.g. "Linux 6.1.0-28-amd64"
  std::string arch;       // uname machine, e.g. "x86_64"
  std::string cpu_model;  // /proc/cpuinfo "model name" (or the nearest field on other CPUs)
  int logical_cores = 0;
  std::int64_t memory_total_bytes = 0;
};

// What the CUDA library reports (filled by the CLI from ws1cuda::DeviceInfo and the cuBLAS
// handle's readback when built with CUDA). Versions are strings as NVIDIA prints them.
struct GpuEnvironment {
  std::string name;                 // "NVIDIA H200"
  std::string compute_capability;   // "9.0"
  int sm_count = 0;
  std::int64_t memory_bytes = 0;
  std::int64_t l2_cache_bytes = 0;
  std::string driver_version;       // CUDA version the driver supports, "13.0"
  std::string cuda_runtime_version; // "13.0"
  std::string cublas_version;       // "13.1.0"
  std::string cublas_math_mode;     // "CUBLAS_PEDANTIC_MATH", "CUBLAS_DEFAULT_MATH", ...
  bool tf32_enabled = false;        // TF32 state read back from the library, not assumed
};

// The git checkout a directory lies in, read at run time.
struct Checkout {
  std::string commit;  // full hex object name of HEAD
  bool dirty = false;  // tracked files differ from HEAD (untracked files are ignored)
};

struct Environment {
  HostInfo host;
  std::string compiler;    // of this binary, from build_info()
  std::string build_type;
  bool built_with_cuda = false;
  std::string backend;     // backend profile of the run: "cuda_bf16", "cpu_bf16", ...
  std::optional<GpuEnvironment> gpu;  // absent: no GPU used; gpu_absent_reason says why
  std::string gpu_absent_reason;
  std::string autocast = std::string(kAutocastNotApplicable);
  std::string captured_at;  // UTC ISO 8601
};

// Host readback. Never fails: a field that cannot be read is "unknown" (0 for numbers).
HostInfo read_host();

// Commit and dirty state of the git checkout containing `dir`, by running git (no shell).
// Absent (not an error) when git is not installed, `dir` is not inside a work tree, or HEAD
// has no commit yet.
std::optional<Checkout> read_checkout(const std::filesystem::path& dir);

// Host + build + time. No GPU: backend "cpu_bf16", gpu absent with the reason "built without
// CUDA" (or "GPU not queried" in a CUDA build; the CLI fills gpu and backend then).
Environment read_environment();

// "2026-11-30T12:34:56.789Z" (UTC, millisecond precision).
std::string utc_iso8601(std::chrono::system_clock::time_point t);
std::string utc_now_iso8601();

// CUDA's integer versions as NVIDIA prints them: 13000 -> "13.0", 12080 -> "12.8".
std::string cuda_version_string(int version);
// cuBLAS MAJOR*10000 + MINOR*100 + PATCH -> "13.1.0".
std::string cublas_version_string(int version);

}  // namespace ws1
