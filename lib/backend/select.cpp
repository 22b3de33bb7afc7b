// The registry of backends and reference engines, and make_backend: the backend a name stands
// for. Built in: cpu_bf16; registered by a CUDA build: cuda_bf16, cuda_fp32. External, over
// ws1-exec-v1: `exec:COMMAND` (any worker) and the named profile triton_cuda_bf16, the
// project's own worker `python3 triton/ws1_worker.py`.
#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/build_info.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/reference.hpp"

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

struct Registry {
  std::mutex mutex;
  std::vector<BackendEntry> backends;
  std::vector<ReferenceEntry> references;
};

Registry& registry() {
  static Registry r;
  return r;
}

template <class Entry>
void put(std::vector<Entry>& entries, Entry e) {
  for (Entry& x : entries)
    if (x.name == e.name) {
      x = std::move(e);
      return;
    }
  entries.push_back(std::move(e));
}

template <class Entry>
std::optional<Entry> find(const std::vector<Entry>& entries, std::string_view name) {
  for (const Entry& e : entries)
    if (e.name == name) return e;
  return std::nullopt;
}

Error no_device(std::string_view option, std::string_view name) {
  return Error{std::string(option), std::string(name), "needs a CUDA device and none was found",
               ExitCode::kEnvironment};
}

}  // namespace

void register_backend(BackendEntry entry) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  put(r.backends, std::move(entry));
}

void register_reference(ReferenceEntry entry) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  put(r.references, std::move(entry));
}

Result<std::unique_ptr<Backend>> open_backend(std::string_view name, bool gpu_present) {
  std::vector<BackendEntry> entries;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    entries = r.backends;
  }
  if (name.empty()) {
    if (gpu_present)
      for (const BackendEntry& e : entries)
        if (e.default_with_gpu) return e.make();
    spdlog::info(gpu_present ? "a GPU is present but this build has no CUDA: using the cpu_bf16 backend"
                             : "no GPU: using the cpu_bf16 backend");
    return make_backend("cpu_bf16");
  }
  // The Triton worker needs a GPU too (its device is found by the worker, not by us).
  if ((name == kTritonProfile || name == "cuda_bf16") && !gpu_present) return no_device("--backend", name);
  if (auto e = find(entries, name)) {
    if (e->needs_gpu && !gpu_present) return no_device("--backend", name);
    return e->make();
  }
  return make_backend(name);
}

Result<std::unique_ptr<ReferenceEngine>> open_reference(std::string_view name, bool gpu_present) {
  if (name.empty() || name == "cpu") return std::unique_ptr<ReferenceEngine>();
  std::optional<ReferenceEntry> e;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    e = find(r.references, name);
  }
  if (!e && name != "cuda_fp32") return bad_input("--reference", std::string(name), "expected cpu or cuda_fp32");
  if (!gpu_present && (!e || e->needs_gpu)) return no_device("--reference", name);
  if (!e) return Error{"--reference", std::string(name), "this build has no CUDA", ExitCode::kEnvironment};
  return e->make();
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name) {
  if (name == "cpu_bf16") return make_cpu_bf16_backend();
  std::optional<BackendEntry> registered;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    registered = find(r.backends, name);
  }
  if (registered) return registered->make();
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
