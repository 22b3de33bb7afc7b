// Fixture lock files (fixtures/<workload>.lock.json): the pinned XXH3-128 hash of every
// fixture of a workload. A generated or imported fixture whose hash differs, or that the lock
// does not list, is refused.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/fixture.hpp"
#include "ws1/manifest.hpp"

namespace ws1 {

inline constexpr std::string_view kFixtureLockFormat = "ws1-fixture-lock-v1";

struct FixtureLock {
  std::string file;  // where it was read from / will be written to (for messages)
  std::string workload_id;
  std::string manifest_identity_sha256;
  std::string generator_version;
  std::vector<std::pair<std::string, std::string>> fixtures;  // (fixture id, hash), in order
  const std::string* hash_of(std::string_view fixture_id) const;
};

Result<FixtureLock> load_fixture_lock(const std::filesystem::path& path);
Result<FixtureLock> parse_fixture_lock(std::string_view json_text, std::string_view file);

// The lock belongs to this manifest and generator: workload id, manifest identity and
// generator version all match (else an error naming the lock file and the field).
Status check_lock_matches(const FixtureLock& lock, const Manifest& manifest);

// `actual_hash` is the hash pinned for `fixture_id`. Errors name the lock file, the fixture
// id and both hashes; an id the lock does not list is refused too.
Status verify_fixture_hash(const FixtureLock& lock, std::string_view fixture_id,
                           std::string_view actual_hash);
Status verify_fixture(const FixtureLock& lock, const Fixture& fixture);

// Generates every fixture of `catalogue` and records its hash (for `fixtures lock`).
Result<FixtureLock> compute_fixture_lock(const Manifest& manifest,
                                         std::span<const FixtureSpec> catalogue,
                                         GenerateOptions options = {});

// The lock as JSON text (2-space indent, trailing newline), and its atomic write (a temporary
// file in the same folder, then rename).
std::string fixture_lock_json(const FixtureLock& lock);
Status write_fixture_lock(const std::filesystem::path& path, const FixtureLock& lock);

}  // namespace ws1
