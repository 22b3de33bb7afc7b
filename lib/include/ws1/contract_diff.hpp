// What one tolerance contract changes against another, leaf by leaf: the rows a reviewer reads
// to see what a new contract version (ws1-c1-v3 against the v2 in force) moves.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ws1/error.hpp"

namespace ws1 {

// One leaf whose value differs between the two contracts, or that only one of them has.
struct ContractRowDiff {
  // The leaf's json path, spelled as the loader's errors spell it
  // ("chain_logprob_aggregates.metrics.approx_kl0.by_execution_dtype.bfloat16.threshold").
  std::string path;
  // The value as compact JSON text (numbers in shortest round-trip form, a float literal keeps
  // its ".0"); nullopt where the leaf is absent from that contract.
  std::optional<std::string> base;
  std::optional<std::string> other;
};

// The differences of `other` against `base`. Both files must load and validate as contracts
// (load_contract): the first that does not gives the loader's Error. Objects are compared key by
// key, down to their leaves; scalars, arrays (as one whole value) and empty objects are leaves.
// Rows are sorted by path; identical values give no row, identical files an empty list.
Result<std::vector<ContractRowDiff>> diff_contract_files(const std::filesystem::path& base,
                                                         const std::filesystem::path& other);

}  // namespace ws1
