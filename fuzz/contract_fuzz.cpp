// Fuzz target: bytes of a tolerance contract file through parse_contract, the in-memory entry
// point under load_contract (`--contract FILE`). An accepted contract is then queried the way
// the runner does (every table row, every chain threshold, the declarations), so that a loader
// that lets an inconsistent model through shows up in the lookups.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ws1/contract.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ws1::Result<ws1::Contract> contract = ws1::parse_contract(text, "fuzz-contract.json");
  if (!contract) return 0;
  const ws1::Contract& c = *contract;
  for (ws1::Judgment j : ws1::all_judgments()) {
    (void)c.roles_for(j);
    for (ws1::OpClass k : ws1::all_op_classes())
      for (ws1::ContractDType t : ws1::all_contract_dtypes()) {
        (void)c.threshold(j, k, t);
        (void)c.threshold(j, k, t, "sm90");
      }
  }
  for (ws1::ChainMetric m : ws1::all_chain_metrics())
    for (ws1::ContractDType t : ws1::all_contract_dtypes()) (void)c.chain_threshold(m, t);
  (void)c.parity_roles();
  (void)c.clip_interval();
  for (const ws1::OpClassEntry& e : ws1::spec_op_classes()) {
    (void)c.op_class(e.op);
    (void)c.accumulation_exception(e.op);
  }
  (void)c.undeclared();
  return 0;
}
