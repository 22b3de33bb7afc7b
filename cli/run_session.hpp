// What every judging subcommand opens before its first cell: the contract, the workload with
// its lock, the evidence header (environment, GPU readback), the backend and the run context.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "workload_context.hpp"
#include "ws1/backend.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/runner.hpp"

namespace ws1cli {

struct SessionOptions {
  std::string backend, contract, workload;
  unsigned threads = 0;
  std::string reference;  // --reference: "" or cpu (each op's CPU reference), cuda_fp32
};

struct Session {
  ws1::Contract contract;
  WorkloadContext workload;
  ws1::Evidence evidence;
  std::unique_ptr<ws1::Backend> backend;
  std::unique_ptr<ws1::ReferenceEngine> reference;  // null: the CPU references
  ws1::RunContext run;  // points into contract and workload: a Session does not move
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

// Loads and checks everything (bad input: an Error naming the file and field; no device for a
// GPU backend: an Error the caller reports with exit 3), logs the run's assumptions.
ws1::Result<std::unique_ptr<Session>> open_session(const SessionOptions& o);

}  // namespace ws1cli
