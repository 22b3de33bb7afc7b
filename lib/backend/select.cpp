// make_backend: the backend a name stands for. Built in: cpu_bf16 (cuda_bf16 is opened by the
// CLI when it is built with CUDA). External, over ws1-exec-v1: `exec:COMMAND` (any worker) and
// the named profile triton_cuda_bf16, the project's own worker `python3 triton/ws1_worker.py`.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "ws1/backend.hpp"
#include "ws1/build_info.hpp"
#include "ws1/exec_backend.hpp"

namespace ws1 {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kExecPrefix = "exec:";
constexpr std::string_view kTritonProfile = "triton_cuda_bf16";

// `s` as one word for /bin/sh.
std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// triton_cuda_bf16: the Triton kernels of triton/, served by triton/ws1_worker.py under
// $WS1CHECK_PYTHON (default python3 on PATH); the worker must announce that backend id.
Result<std::unique_ptr<Backend>> triton_profile(ExecOptions o) {
  const fs::path worker = ws1::shipped_path("triton/ws1_worker.py");
  std::error_code ec;
  if (!fs::is_regular_file(worker, ec))
    return Error{"--backend", std::string(kTritonProfile),
                 fmt::format("its worker {} is missing (set WS1CHECK_DATA_DIR to a ws1check tree)",
                             worker.string()),
                 ExitCode::kEnvironment};
  const char* python = std::getenv("WS1CHECK_PYTHON");
  const std::string interpreter = python != nullptr && *python != '\0' ? python : "python3";
  o.command = shell_quote(interpreter) + " " + shell_quote(worker.string());
  o.profile = std::string(kTritonProfile);
  return make_exec_backend(o);
}

}  // namespace

Result<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "cpu_bf16") return make_cpu_bf16_backend();
  const bool exec = name.substr(0, kExecPrefix.size()) == kExecPrefix;
  if (exec || name == kTritonProfile) {
    auto timeout = exec_timeout_from_env();
    if (!timeout) return timeout.error();
    auto min_bytes = exec_cache_min_bytes_from_env();
    if (!min_bytes) return min_bytes.error();
    ExecOptions o{"", "", *timeout};
    o.input_cache_min_bytes = *min_bytes;
    if (name == kTritonProfile) return triton_profile(std::move(o));
    o.command = std::string(name.substr(kExecPrefix.size()));
    return make_exec_backend(o);
  }
  if (name == "cuda_bf16")
    return Error{"--backend", std::string(name), "not available in this build",
                 ExitCode::kEnvironment};
  return bad_input("--backend", std::string(name),
                   "unknown backend (known: cpu_bf16, cuda_bf16, triton_cuda_bf16, exec:COMMAND)");
}

}  // namespace ws1
