// A workload loaded for a subcommand: manifest, its fixture catalogue and its lock file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/fixture.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/manifest.hpp"

namespace ws1cli {

// fixtures/ws1-smoke.json -> fixtures/ws1-smoke.lock.json
std::filesystem::path lock_path_for(const std::filesystem::path& workload);

struct WorkloadContext {
  ws1::Manifest manifest;
  std::vector<ws1::FixtureSpec> catalogue;
  std::filesystem::path lock_path;
  std::optional<ws1::FixtureLock> lock;  // loaded and checked against the manifest when asked

  static ws1::Result<WorkloadContext> load(const std::string& workload, bool with_lock);
  ws1::Result<const ws1::FixtureSpec*> find(const std::string& id) const;
};

}  // namespace ws1cli
