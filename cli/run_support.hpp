// What the judging subcommands (accuracy, invariance, ...) share: option sets, op and backend
// selection, and the end of a run (table on stdout, evidence artifact, exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/reference.hpp"
#include "ws1/evidence.hpp"
#include "ws1/op.hpp"

namespace ws1cli {

void add_run_options(CLI::App* sub, std::string& backend, std::string& contract,
                     std::string& workload, std::string& out, bool& json, unsigned& threads);

// --direction fwd | bwd | both -> the forward judgment, the gradient one, or both.
ws1::Result<std::vector<ws1::Judgment>> judgments_for(const std::string& direction,
                                                      ws1::Judgment forward, ws1::Judgment gradient);

// "all" -> every op of the catalogue; else one name. An op of the catalogue without an
// implementation is an error naming it.
ws1::Result<std::vector<const ws1::Op*>> select_ops(const std::string& op);

// The line above a run's table that names the contract which judged it (version, path, hash).
void print_contract_line(const ws1::Evidence& evidence);

// Finishes `evidence` (time), writes `<out>/<name>.json` atomically, prints the table (or the
// artifact with --json) and returns 0 when no cell is red, 1 otherwise.
int finish_run(ws1::Evidence& evidence, const std::string& out, const std::string& name,
               bool json);

}  // namespace ws1cli
