// The cell runner (DESIGN §2): fixture -> candidate (backend) and FP32 reference -> judge ->
// evidence cell. Every subcommand that judges goes through here.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/fixture.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/manifest.hpp"
#include "ws1/op.hpp"

namespace ws1 {

// What every cell of a run shares.
struct RunContext {
  const Contract* contract = nullptr;
  const Manifest* manifest = nullptr;
  const FixtureLock* lock = nullptr;  // fixtures are refused unless their hash is pinned here
  OpContext op_context;
  std::string expected_backend;       // the profile asked for
  std::string arch;                   // contract arch override key ("sm90"), empty on the CPU
  // Declarations the contract did not carry, and the value used instead (for the log and the
  // evidence): e.g. "ws1check_declarations.rms_norm_rounding: undeclared, using kernel order".
  std::vector<std::string> assumptions;
};

// Op settings from the manifest's model config and the contract's declarations. Where the
// contract does not declare an item, the value the standard's origin uses is taken and an
// assumption is recorded (never silently).
RunContext make_run_context(const Contract& contract, const Manifest& manifest,
                            const FixtureLock& lock, std::string expected_backend,
                            unsigned threads);

// The op class the contract declares for `op`, else spec §2.3's partition.
OpClass op_class_for(const RunContext& run, const Op& op);

// One accuracy cell: `judgment` (forward or gradient accuracy) of `op` on `fixture`.
// Bad input (a fixture not pinned by the lock, a reference whose dtype is not the contract's
// reference_dtype, a contract without the row) is an Error; everything the candidate does
// wrong (an error, a missing output, a wrong dtype or shape, a value out of tolerance) is a
// red cell with its reason.
Result<Cell> run_accuracy_cell(const RunContext& run, FixtureGenerator& generator,
                               Backend& backend, const Op& op, Judgment judgment,
                               const FixtureSpec& fixture);

// The same on tensors the user brought (--inputs): no lock, the fixture id is "user:<file>"
// and its hash is taken over the tensors as given.
Result<Cell> run_accuracy_cell_on(const RunContext& run, Backend& backend, const Op& op,
                                  Judgment judgment, const std::string& fixture_id,
                                  const std::string& fixture_hash, std::uint64_t seed,
                                  Tier tier, const Tensors& inputs,
                                  Tensors* dump_candidate = nullptr,
                                  Tensors* dump_reference = nullptr);

}  // namespace ws1
