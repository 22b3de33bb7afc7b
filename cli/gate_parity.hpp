// The gate's parity stage (spec §8, DESIGN §6a): the manifest protocol — teacher forcing against
// rollout decode, the contract's chain aggregates — on every backend of the gate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "run_session.hpp"
#include "ws1/report.hpp"

namespace ws1cli {

// One chain_parity cell per session, appended to `cells`, with --model's weights (synthetic
// weights exercise the chain and say so; only the pinned snapshot is the WS1 chain gate). The
// stage fails when a cell is red; bad input (weights, fixture) is an Error.
ws1::Result<ws1::GateStage> parity_stage(const std::string& model, const std::vector<std::unique_ptr<Session>>& sessions,
                                         unsigned threads, std::vector<ws1::Cell>& cells);

}  // namespace ws1cli
