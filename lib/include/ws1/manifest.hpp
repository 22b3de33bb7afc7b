// The workload manifest, in the upstream format (RL-Align/RL-Kernel `ws1_manifest.json`,
// versions ws1-c2-v7 and -v8): model identity, the logical token fixture (samples, chunking,
// permutation, padding), representative cases per backend profile, and its identity hash.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"

namespace ws1 {

// Tier of a representative case or fixture. A case's tier comes from its fixture_id prefix:
// "short_" -> kShort, "rep_" -> kPrimary, "long_" -> kLong (decode cases; not a C8 row).
// kInvariance is the tier of the logical-token invariance fixtures (never a case's tier).
enum class Tier { kShort, kPrimary, kLong, kInvariance };

std::string_view tier_name(Tier t);  // "short", "primary", "long", "invariance"
std::optional<Tier> tier_from_name(std::string_view name);
std::optional<Tier> tier_from_fixture_id(std::string_view fixture_id);

// config_fingerprint: the fields ws1check uses.
struct ModelConfig {
  std::int64_t num_hidden_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  double rope_theta = 0;
  bool rope_scaling_null = true;  // rope_scaling is null (no scaling)
  double rms_norm_eps = 0;
  std::string hidden_act;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool qk_norm = false;
};

struct WeightShard {
  std::string filename;
  std::string sha256;
  std::uint64_t size_bytes = 0;
};

// weight_snapshot. content_hash is checked on load: SHA-256 over one record per shard,
// sorted by filename, "filename\tsha256\tsize_bytes\n".
struct WeightSnapshot {
  std::string pin_method;
  std::string index_file;
  std::string index_sha256;
  std::string content_hash_algorithm;
  std::string content_hash;
  std::vector<WeightShard> shards;
};

// content_hash of shard records: SHA-256 over "filename\tsha256\tsize_bytes\n" per shard, sorted
// by filename (content_hash_algorithm sha256-of-sorted-shard-records-v1).
inline constexpr std::string_view kShardRecordsHash = "sha256-of-sorted-shard-records-v1";
std::string shard_records_sha256(const std::vector<WeightShard>& shards);

struct ModelIdentity {
  std::string model_id;
  std::string revision;
  std::string architecture;
  ModelConfig config;
  WeightSnapshot weights;
};

// One logical sample of the primary fixture (fixtures.samples[]).
struct Sample {
  std::string sample_id;
  std::int64_t seq_len = 0;
  std::int64_t prompt_len = 0;
  std::vector<std::int64_t> token_ids;
  std::int64_t completion_len() const { return seq_len - prompt_len; }
  // Sum of the ASCII codes of sample_id (upstream's invariance-pattern "sample_ord").
  std::int64_t ordinal() const;
};

// fixtures.short_full_model_fixture / long_full_model_fixture (token_ids set) and
// representative_full_model_fixture (sample_ids set, points at `samples`).
struct SequenceFixture {
  std::string fixture_id;
  std::int64_t seq_len = 0;
  std::int64_t prompt_len = 0;
  std::vector<std::int64_t> token_ids;
  std::vector<std::string> sample_ids;
  std::vector<std::string> candidate_case_ids;
};

// primary_matrix.cells[]
struct MatrixCell {
  std::string cell_id;
  std::string batch_mode;
  std::int64_t batch_size_per_run = 0;
  std::int64_t num_runs = 0;
  std::string prefill_mode;
};

// representative_cases[].shape: integer dimensions by name, and the string entries
// ("note", "mode") kept apart.
struct CaseShape {
  std::map<std::string, std::int64_t> dims;
  std::map<std::string, std::string> text;
  std::optional<std::int64_t> dim(std::string_view name) const;
};

struct RepresentativeCase {
  std::string case_id;
  std::string family;
  std::string fixture_id;
  Tier tier = Tier::kShort;
  std::string operator_spec;  // op name: det_gemm, attention, logp, rms_norm, ...
  CaseShape shape;
  std::vector<std::string> profile_ids;
  std::string expected_backend_id;
  std::string expected_kernel_config_id;
  std::string actual_backend_id;
  std::string actual_kernel_config_id;
  std::string algorithm_property;
  std::string json_path;  // "representative_cases[12]", for messages
};

// backend_profiles.<name>.required_nodes[]
struct RequiredNode {
  std::string node;
  std::string expected_backend_id;
  std::string expected_kernel_config_id;
  std::string algorithm_property;
  std::string status;
};

struct WorkloadProfile {
  std::string name;
  std::string backend_family;
  std::string execution_dtype;
  std::vector<RequiredNode> required_nodes;
};

struct Manifest {
  std::string file;  // where it was read from (for messages)
  std::string version;
  std::string workload_id;
  std::int64_t seed = 0;
  ModelIdentity model;

  // chain_semantics
  std::string execution_dtype;
  std::string reference_dtype;
  std::string accumulation_dtype;
  std::array<double, 2> clip_interval{};

  // primary_matrix
  std::int64_t matrix_n = 0;
  std::vector<std::string> sample_ids;
  bool permutation_enabled = false;
  std::vector<std::int64_t> batch_permutation;
  std::int64_t chunk_size = 0;
  std::vector<MatrixCell> cells;

  // fixtures
  std::vector<Sample> samples;
  std::int64_t primary_seq_len = 0;
  std::int64_t primary_prompt_len = 0;
  std::vector<std::int64_t> varlen_seq_lens;
  std::vector<std::int64_t> prompt_lens;
  std::vector<std::int64_t> completion_lens;
  std::int64_t max_completion_len = 0;
  std::vector<std::string> padding_modes;
  std::int64_t pad_token_id = 0;
  std::int64_t padded_len = 0;
  SequenceFixture short_fixture;
  SequenceFixture long_fixture;
  SequenceFixture rep_fixture;

  // capabilities
  std::map<std::string, std::string> operator_spec_map;  // node name -> op name
  std::vector<std::pair<std::string, std::string>> required_chain_ops;  // (op, status)

  std::vector<WorkloadProfile> profiles;  // in file order
  std::vector<RepresentativeCase> cases;  // in file order

  std::string identity_sha256;  // stored fixture_identity_sha256, equal to the recomputed one

  std::int64_t total_tokens() const;   // sum of sample seq_len (59)
  std::int64_t active_tokens() const;  // sum of completion lengths (27)
  const WorkloadProfile* profile(std::string_view name) const;
  const Sample* sample(std::string_view sample_id) const;
  const RepresentativeCase* find_case(std::string_view case_id) const;
};

// Reads and validates a manifest. Fails closed on a missing or mistyped field that ws1check
// uses, a duplicate key anywhere, inconsistent lengths/ids, or an identity hash that does not
// recompute. Errors are one line `file: json.path: problem`.
Result<Manifest> load_manifest(const std::filesystem::path& path);
// The same from text; `file` labels errors and becomes Manifest::file.
Result<Manifest> parse_manifest(std::string_view json_text, std::string_view file);

// Upstream's manifest identity: SHA-256 (hex) of the canonical JSON (ws1/canonical_json.hpp)
// of the whole manifest object without its top-level "fixture_identity_sha256" key.
Result<std::string> manifest_identity_sha256(std::string_view json_text, std::string_view file);

}  // namespace ws1
