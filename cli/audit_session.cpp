#include "audit_session.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "common.hpp"
#include "gpu_environment.hpp"
#include "run_support.hpp"
#include "workload_context.hpp"
#include "ws1/backend.hpp"
#include "ws1/build_info.hpp"
#include "ws1/runner.hpp"

namespace ws1cli {

std::string default_tiny_workload() { return shipped_file("fixtures/ws1-smoke.json").string(); }

namespace {

ws1::WorkloadRef workload_ref(const ws1::Manifest& m) {
  return {m.file, m.workload_id, m.version, m.identity_sha256};
}

// The shipped CUDA code is linked into this executable (libws1cuda is a static library).
std::filesystem::path this_binary() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(cli_argv().empty() ? "ws1check" : cli_argv().front()) : p;
}

}  // namespace

ws1::Result<BuildAuditRun> run_build_audit(const BuildAuditOptions& o) {
  // An artifact that does not load is refused before anything runs.
  std::optional<std::filesystem::path> evidence;
  if (!o.evidence.empty()) evidence = o.evidence;
  if (auto ev = ws1::audit_evidence_currency(evidence, ws1::build_info()); !ev) return ev.error();
  auto contract = ws1::load_contract(o.contract.empty() ? default_contract() : o.contract);
  if (!contract) return contract.error();
  auto tiny = WorkloadContext::load(o.workload.empty() ? default_tiny_workload() : o.workload, true);
  if (!tiny) return tiny.error();
  auto probe = WorkloadContext::load(o.probe_workload.empty() ? default_workload() : o.probe_workload,
                                     false);
  if (!probe) return probe.error();

  // Backends: cpu_bf16 always; cuda_bf16 where a device answers and the backend is built.
  ws1::Environment env = ws1::read_environment();
  const bool gpu = fill_gpu_environment(env);
  std::unique_ptr<ws1::Backend> cpu = ws1::make_cpu_bf16_backend();
  std::unique_ptr<ws1::Backend> cuda;
  std::vector<ws1::AuditBackend> backends{{"cpu_bf16", cpu.get(), ""}};
  ws1::AuditBackend cuda_entry{"cuda_bf16", nullptr, ""};
  if (!gpu) {
    cuda_entry.absent = env.gpu_absent_reason.empty() ? "no CUDA device" : env.gpu_absent_reason;
  } else if (auto b = ws1::open_backend("cuda_bf16", gpu); !b) {
    cuda_entry.absent = b.error().problem;
  } else {
    cuda = std::move(b).value();
    cuda_entry.backend = cuda.get();
  }
  backends.push_back(cuda_entry);
  std::vector<std::unique_ptr<ws1::Backend>> extra;
  for (const std::string& name : o.backends) {
    if (name == "cpu_bf16" || name == "cuda_bf16") continue;
    ws1::AuditBackend entry{name, nullptr, ""};
    if (auto b = ws1::open_backend(name, gpu); !b) {
      entry.absent = b.error().problem;
    } else {
      extra.push_back(std::move(b).value());
      entry.backend = extra.back().get();
    }
    backends.push_back(entry);
  }

  ws1::Tf32Observation tf32;
  tf32.built_with_cuda = ws1::build_info().cuda;
  tf32.gpu = env.gpu;
  tf32.gpu_absent_reason = env.gpu_absent_reason;
  const auto cuobjdump = ws1::find_cuobjdump();
  if (tf32.built_with_cuda) {
    tf32.sass = ws1::scan_binary_sass(cuobjdump, this_binary());
  } else {
    tf32.sass.not_run = "built without CUDA";
    tf32.sass.tool = cuobjdump ? cuobjdump->string() : "";
  }

  const ws1::FixtureLock no_lock;  // the probes generate their own inputs (not fixtures)
  const ws1::RunContext tiny_run =
      ws1::make_run_context(*contract, tiny->manifest, *tiny->lock, "cpu_bf16", o.threads);
  const ws1::RunContext probe_run =
      ws1::make_run_context(*contract, probe->manifest, no_lock, "cpu_bf16", o.threads);
  for (const auto& a : tiny_run.assumptions) spdlog::warn("{}", a);

  ws1::BuildAuditInputs in;
  in.tiny = &tiny_run;
  in.tiny_catalogue = tiny->catalogue;
  in.probe = &probe_run;
  in.backends = backends;
  in.tf32 = tf32;
  in.project_root = ws1::build_info().source_root;
  in.evidence = evidence;
  auto rows = ws1::audit_build(in);
  if (!rows) return rows.error();

  BuildAuditRun run;
  run.contract = {contract->file, contract->version, contract->sha256};
  run.tiny = workload_ref(tiny->manifest);
  run.probe = workload_ref(probe->manifest);
  run.rows = std::move(rows).value();
  return run;
}

}  // namespace ws1cli
