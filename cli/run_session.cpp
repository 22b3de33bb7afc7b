#include "run_session.hpp"

#include <spdlog/spdlog.h>

#include "common.hpp"
#include "gpu_environment.hpp"
#include "run_support.hpp"

namespace ws1cli {

ws1::Result<std::unique_ptr<Session>> open_session(const SessionOptions& o) {
  auto s = std::make_unique<Session>();
  auto contract = ws1::load_contract(o.contract.empty() ? default_contract() : o.contract);
  if (!contract) return contract.error();
  s->contract = std::move(contract).value();
  auto ctx = WorkloadContext::load(o.workload.empty() ? default_workload() : o.workload, true);
  if (!ctx) return ctx.error();
  s->workload = std::move(ctx).value();

  s->evidence = ws1::begin_evidence(cli_argv());
  const bool gpu = fill_gpu_environment(s->evidence.environment);
  // The reference engine first: a bad --reference is refused before any backend is chosen.
  auto reference = ws1::open_reference(o.reference, gpu);
  if (!reference) return reference.error();
  s->reference = std::move(reference).value();
  auto backend = ws1::open_backend(o.backend, gpu);
  if (!backend) return backend.error();
  s->backend = std::move(backend).value();
  s->evidence.environment.backend = s->backend->name();
  s->evidence.contract = {s->contract.file, s->contract.version, s->contract.sha256};
  const ws1::Manifest& m = s->workload.manifest;
  s->evidence.workload = {m.file, m.workload_id, m.version, m.identity_sha256};

  s->run = ws1::make_run_context(s->contract, m, *s->workload.lock, s->backend->name(), o.threads);
  s->run.reference = s->reference.get();
  for (const auto& a : s->run.assumptions) spdlog::warn("{}", a);
  return s;
}

}  // namespace ws1cli
