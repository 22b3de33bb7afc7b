// The cell runner (DESIGN §2): fixture -> candidate (backend) and FP32 reference -> judge ->
// evidence cell. Every subcommand that judges goes through here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <string>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/reference.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/fixture.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/manifest.hpp"
#include "ws1/op.hpp"

namespace ws1 {

// What every cell of a run shares.
// v3's relative criterion needs, per accuracy tensor, the naive bf16 engine's largest error
// against the reference. It depends on the fixture, the direction, the tensor and the reference
// engine only, not on the candidate, so runs of several backends over one workload (a gate)
// share this memo and compute each once. Thread-safe.
class NaiveErrorMemo {
 public:
  std::optional<double> find(const std::string& key) const;
  void put(const std::string& key, double max_abs);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, double> values_;
};

struct RunContext {
  const Contract* contract = nullptr;
  const Manifest* manifest = nullptr;
  const FixtureLock* lock = nullptr;  // fixtures are refused unless their hash is pinned here
  OpContext op_context;
  std::string expected_backend;       // the profile asked for
  std::string arch;                   // contract arch override key ("sm90"), empty on the CPU
  // Where accuracy references are computed (ws1/reference.hpp); nullptr: each op's CPU
  // reference. Not owned.
  ReferenceEngine* reference = nullptr;
  // Declarations the contract did not carry, and the value used instead (for the log and the
  // evidence): e.g. "ws1check_declarations.rms_norm_rounding: undeclared, using kernel order".
  std::vector<std::string> assumptions;
  // Shared by the runs that judge the same fixtures (ws1-c1-v3); nullptr: none kept.
  std::shared_ptr<NaiveErrorMemo> naive_errors;
};

// Op settings from the manifest's model config and the contract's declarations. Where the
// contract does not declare an item, the value the standard's origin uses is taken and an
// assumption is recorded (never silently).
RunContext make_run_context(const Contract& contract, const Manifest& manifest,
                            const FixtureLock& lock, std::string expected_backend,
                            unsigned threads);

// The op class the contract declares for `op`, else spec §2.3's partition.
OpClass op_class_for(const RunContext& run, const Op& op);

// ---- accuracy cells ----

// The tier a cell on the user's tensors reports (evidence Cell::tier): not a workload tier.
inline constexpr std::string_view kUserTier = "user";

// The tensors one accuracy cell runs on, with their identity for the evidence.
struct CellInputs {
  std::string fixture_id;   // "rms_norm/primary/normal", or "user:<file name>"
  std::string hash;         // XXH3-128 hex: fixture_hash(hashed_id, seed, tensors)
  std::string hashed_id;    // the id hashed: fixture_id, or the original fixture's for a replay
  std::uint64_t seed = 0;   // the seed hashed with the tensors (0 for plain user files)
  std::string tier;         // "short", "primary", "long", or kUserTier
  Tensors tensors;          // the op's inputs, gradient seeds dy.* included when present
  // Non-empty for the user's tensors: an op's complaint about a tensor (a shape that does not
  // fit) is reported against this file.
  std::string source_file;
  // Seconds spent generating the tensors and checking them against the lock (< 0: not generated
  // here, e.g. the user's file).
  double generate_seconds = -1;
};

// What a cell computed, kept when the caller asks for it (--dump).
struct CellTensors {
  Tensors candidate;  // outputs (forward) or gradients (backward); empty if the candidate failed
  Tensors reference;  // the FP32 reference's
};

// A generated fixture as cell inputs: generated, then refused unless its hash is pinned by
// run.lock (verify_fixture).
Result<CellInputs> generated_inputs(const RunContext& run, FixtureGenerator& generator,
                                    const FixtureSpec& fixture);

// One accuracy cell: `judgment` (forward or gradient accuracy) of `op` on `inputs`.
// Bad input (a reference whose dtype is not the contract's reference_dtype, a contract without
// the row, tensors the op refuses) is an Error; everything the candidate does wrong (an error,
// a missing output, a wrong dtype or shape, a value out of tolerance) is a red cell with its
// reason. `keep`, when given, receives the candidate's and the reference's tensors.
Result<Cell> run_accuracy_cell_on(const RunContext& run, Backend& backend, const Op& op,
                                  Judgment judgment, const CellInputs& inputs,
                                  CellTensors* keep = nullptr);

// generated_inputs, then run_accuracy_cell_on.
Result<Cell> run_accuracy_cell(const RunContext& run, FixtureGenerator& generator,
                               Backend& backend, const Op& op, Judgment judgment,
                               const FixtureSpec& fixture);

// ---- the tensors an op takes (`ws1check ops --op X`, `accuracy --inputs`) ----

struct OpInputDecl {
  std::string name;  // "x", "weight", "dy.y", "key_mask", ...
  DType dtype = DType::kBF16;
  TensorRole role = TensorRole::kActivation;  // kGradSeed: needed by backward only
  bool optional = false;                      // may be left out (attention's key_mask)
  std::string note;                           // what an optional input means
  // The shapes the workload's fixtures give it, per tier (short, primary, long); other shapes
  // are accepted where the op's definition allows them.
  std::vector<std::pair<Tier, Shape>> shapes;
};

// From the workload's fixture catalogue (names, dtypes and order of the op's fixtures), plus
// the inputs the op accepts beyond its fixtures. Empty when the catalogue has no fixture of
// `op`.
std::vector<OpInputDecl> op_input_decls(std::span<const FixtureSpec> catalogue,
                                        std::string_view op);

// ---- bring-your-own inputs and dumps ----

inline constexpr std::string_view kDumpFormat = "ws1-dump-v1";
// Metadata keys of dumps and exported fixtures.
inline constexpr std::string_view kMetaDumpFormat = "ws1.dump_format";
inline constexpr std::string_view kMetaFixtureId = "ws1.fixture_id";
inline constexpr std::string_view kMetaFixtureHash = "ws1.fixture_hash";
inline constexpr std::string_view kMetaSeed = "ws1.seed";
inline constexpr std::string_view kMetaHashedId = "ws1.hashed_id";
inline constexpr std::string_view kMetaOp = "ws1.op";

// The cell inputs for `op` from a safetensors file's contents (`file` as the user named it:
// errors name it). Plain files hold the op's tensors under the names op_input_decls lists; a
// ws1check dump (metadata ws1.dump_format) contributes its in.* tensors, prefix stripped, and
// ignores its cand.* and ref.*. Every non-optional input is required, the dy.* seeds only when
// `backward`; dtypes must be the declared ones; a tensor the op does not take is an error.
// The fixture id is "user:<file name>", the tier kUserTier. The hash is fixture_hash over the
// tensors in declaration order, with the id and seed the file's metadata records (files
// ws1check wrote: ws1.hashed_id, else ws1.fixture_id, and ws1.seed), so that a replay hashes
// like the original run; else with "user:<file name>" and seed 0. Where the file records
// ws1.fixture_hash, the tensors must still hash to it (a file edited after ws1check wrote it
// is refused, and the error says to drop the metadata to use it as new inputs).
Result<CellInputs> user_inputs(std::span<const OpInputDecl> decls, std::string_view op,
                               bool backward, const std::string& file,
                               const std::map<std::string, std::string>& metadata,
                               std::span<const NamedTensor> tensors);

// What `--dump` writes for one cell: in.<name> (inputs, dy.* included), cand.<name> and
// ref.<name>, and metadata (format, cell id, op, judgment, tier, verdict, fixture id, hash,
// hashed id, seed, contract version, backend).
struct CellDump {
  std::string file_name;  // the cell id, '/' as "__" and other than [A-Za-z0-9._-] as '_', ".safetensors" once
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};
CellDump cell_dump(const Cell& cell, const CellInputs& inputs, const CellTensors& computed,
                   const Contract& contract);

}  // namespace ws1
