// Fixtures: the named input tensors of one op at one tier and distribution, generated from
// (seed, tensor key) by a counter-based generator so the bytes are the same on every machine
// and for any thread count, and identified by an XXH3-128 hash (docs/fixtures.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"
#include "ws1/manifest.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

// Bumped when the generator itself changes (docs/fixtures.md §5: a catalogue change alters only
// the affected fixtures' hashes); recorded in lock files and mixed into every stream key.
inline constexpr std::string_view kFixtureGeneratorVersion = "ws1-gen-v1";
// First line of the hashed metadata text.
inline constexpr std::string_view kFixtureHashFormat = "ws1-fixture-hash-v1";

// The value distribution or input condition a fixture stresses (its id's last part). The last
// four are conditions a fault needs in order to show (docs/fixtures.md §3): ignore_index
// targets, repeated embedding ids, a key mask, and invariance inputs whose FP32 sums are inexact.
enum class Distribution {
  kNormal, kHeavyTailed, kOutlierChannel, kNearZero, kScaledLogit, kPattern,
  kIgnoreIndex, kRepeatedIds, kKeyMask, kInexact
};
std::string_view distribution_name(Distribution d);  // "normal", "heavy_tailed", ...
std::optional<Distribution> distribution_from_name(std::string_view name);

// How one tensor's elements are made. Element i depends only on (seed, key, i) and the
// parameters below.
enum class GenKind {
  kNormal,          // standard normal * scale
  kStudentT3,       // Student-t with 3 degrees of freedom * scale
  kOutlierChannel,  // standard normal * scale, times outlier_factor in a few fixed channels
                    // of the last dimension
  kUniformInt,      // integers uniform in [0, high), exactly (no modulo bias)
  kTokenPattern,    // upstream invariance pattern for token rows (see token_pattern_value)
  kParamPattern,    // upstream invariance pattern for shared parameters (param_pattern_value)
  kValues,          // explicit values (positions, masks, fixture token ids)
};
std::string_view gen_kind_name(GenKind k);

// One row of a token-pattern tensor (the tensor's first dimension indexes rows).
struct TokenRow {
  std::int64_t sample_ord = 0;  // Sample::ordinal()
  std::int64_t position = 0;    // logical position in the sample
  bool pad = false;             // pad rows are 0
  bool active = true;           // completion token (see GeneratorSpec::active_only)
};

struct GeneratorSpec {
  GenKind kind = GenKind::kNormal;
  std::uint64_t seed = 0;
  std::string key;                    // stream name, e.g. "rms_norm/primary/normal/x"
  double scale = 1.0;                 // normal, Student-t, outlier (a power of two keeps it exact)
  double outlier_factor = 1.0;        // kOutlierChannel
  std::int64_t outlier_channels = 0;  // kOutlierChannel: channels drawn (duplicates merge)
  std::int64_t high = 0;              // kUniformInt: exclusive bound
  std::int64_t offset = 0;            // patterns
  std::vector<TokenRow> rows;         // kTokenPattern: one per row of the first dimension
  bool active_only = false;           // kTokenPattern: inactive rows are 0 (gradient seeds)
  std::vector<std::int64_t> values;   // kValues: one per element
};

enum class TensorRole {
  kActivation,  // a token-dependent input (gets the fixture's stress distribution)
  kParameter,   // a weight: always normal or the parameter pattern; shared between fixtures
  kIndex,       // ids, targets, positions, masks (integers, no gradient)
  kGradSeed,    // dy.<output>: the upstream gradient fed to backward
};
std::string_view tensor_role_name(TensorRole r);

struct TensorSpec {
  std::string name;  // "x", "weight", "dy.y", ...
  DType dtype = DType::kBF16;
  Shape shape;
  TensorRole role = TensorRole::kActivation;
  GeneratorSpec gen;
};

struct FixtureSpec {
  std::string id;  // "<op>/<tier>/<distribution>", e.g. "rms_norm/primary/outlier_channel"
  std::string op;
  Tier tier = Tier::kShort;
  Distribution distribution = Distribution::kNormal;
  std::uint64_t seed = 0;
  std::string case_id;  // the representative case the shapes came from ("" if derived)
  std::vector<TensorSpec> tensors;  // hash order
  const TensorSpec* tensor(std::string_view name) const;
};

struct Fixture {
  std::string id;
  std::uint64_t seed = 0;
  std::vector<NamedTensor> tensors;  // in spec order
  const Tensor* find(std::string_view name) const;
};

// ---- catalogue (lib/fixture/op_inputs.cpp) ----

// The ops fixtures exist for, in catalogue order: the 12 C8 ops, then linear_logp.
std::span<const std::string_view> fixture_ops();

// Every fixture of a workload, in a fixed order (op, then short, primary, long, stress
// variants, invariance). Shapes come from the manifest's representative cases (one fixture per
// (op, tier) whatever the number of profiles; cases of different profiles that disagree on a
// shape are refused) and the model config. Errors name the manifest and the case field.
Result<std::vector<FixtureSpec>> fixture_catalogue(const Manifest& manifest);
// The invariance fixtures of `op` in catalogue order: upstream's pattern first, then the
// inexact family where the op has one.
std::vector<const FixtureSpec*> invariance_fixtures(std::span<const FixtureSpec> catalogue, std::string_view op);
// What an invariance cell id puts before the transform: "" for upstream's pattern (the ids C8
// and earlier evidence know), "<family>/" for another family ("inexact/").
std::string invariance_family_prefix(const FixtureSpec& spec);

// ---- generation ----

struct GenerateOptions {
  unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
};

// Makes tensors from specs. Parameter tensors are cached: fixtures that name the same
// (seed, key, generator, dtype, shape) share one storage instead of regenerating it (do not
// write into a generated parameter; copy it). One generator per thread (not thread-safe; it
// runs its own worker threads inside).
class FixtureGenerator {
 public:
  explicit FixtureGenerator(GenerateOptions options = {});
  ~FixtureGenerator();
  FixtureGenerator(const FixtureGenerator&) = delete;
  FixtureGenerator& operator=(const FixtureGenerator&) = delete;

  Result<Fixture> generate(const FixtureSpec& spec);
  // Drops cached parameters that none of `upcoming` uses (bounds memory over a catalogue).
  void retain_only(std::span<const FixtureSpec> upcoming);
  std::size_t cached_bytes() const;

 private:
  struct Cache;
  GenerateOptions options_;
  std::unique_ptr<Cache> cache_;
};

// One tensor, uncached. Bad specs (a dtype the kind cannot produce, a row count that does not
// divide the shape, ...) are errors naming the tensor.
Result<Tensor> generate_tensor(const TensorSpec& spec, unsigned threads = 0);

// Upstream's exact-in-bf16 invariance values (NOTES §b): element i of the row of
// (sample_ord, position) for input `offset`:  ((i + ord*17 + pos*13 + offset*11) mod 257 - 128)/1024,
// and element i of a shared parameter:  ((i*17 + offset*13) mod 257 - 128)/1024.
float token_pattern_value(std::int64_t i, std::int64_t sample_ord, std::int64_t position,
                          std::int64_t offset);
float param_pattern_value(std::int64_t i, std::int64_t offset);

// ---- hashes ----

// The canonical metadata text hashed before the tensor bytes:
//   ws1-fixture-hash-v1\n id=<id>\n seed=<seed>\n generator=<version>\n tensors=<n>\n
//   then per tensor: tensor=<name> <safetensors dtype> [d0,d1,...]\n   (no spaces in the list)
std::string fixture_hash_metadata(std::string_view fixture_id, std::uint64_t seed,
                                  std::span<const NamedTensor> tensors,
                                  std::string_view generator_version = kFixtureGeneratorVersion);
// XXH3-128 (canonical hex) over the metadata text, then each tensor's little-endian bytes in
// order (row-major; non-contiguous views are hashed as their contiguous copy).
std::string fixture_hash(std::string_view fixture_id, std::uint64_t seed,
                         std::span<const NamedTensor> tensors,
                         std::string_view generator_version = kFixtureGeneratorVersion);
std::string fixture_hash(const Fixture& fixture);
// The hash of tensors brought from elsewhere (e.g. a safetensors import), ordered as `spec`
// lists them. Every spec tensor must be present with the spec's dtype and shape, and no other
// tensor may be; errors name `file` and the tensor.
Result<std::string> fixture_hash_for_spec(const FixtureSpec& spec,
                                          std::span<const NamedTensor> tensors,
                                          std::string_view file);

}  // namespace ws1
