// The build audit as the CLI runs it (`ws1check audit`, and the audit step of `gate`): loads
// the contract and the two workloads, opens every backend (cuda_bf16 named as not present
// where it is not), reads the GPU environment and the shipped SASS, then ws1::audit_build.
#pragma once

#include <string>
#include <vector>

#include "ws1/audit.hpp"
#include "ws1/evidence.hpp"

namespace ws1cli {

// fixtures/ws1-smoke.json: the tiny workload whose short fixtures the gold-provenance and
// logprob rows run on.
std::string default_tiny_workload();

struct BuildAuditOptions {
  std::string contract;        // empty: the shipped contract
  std::string workload;        // empty: default_tiny_workload()
  std::string probe_workload;  // empty: default_workload() (Qwen3-8B widths for the probes)
  std::string evidence;        // empty: no --evidence
  unsigned threads = 0;
  // Backends probed besides cpu_bf16 and cuda_bf16 (names as --backend takes them, e.g.
  // triton_cuda_bf16 or exec:CMD); one that does not open is named as not present.
  std::vector<std::string> backends;
};

struct BuildAuditRun {
  ws1::ContractRef contract;
  ws1::WorkloadRef tiny, probe;
  std::vector<ws1::AuditRow> rows;
};

// Bad input (a contract, workload, lock or evidence file that does not load) is an Error.
ws1::Result<BuildAuditRun> run_build_audit(const BuildAuditOptions& o);

}  // namespace ws1cli
