#include "workload_context.hpp"

namespace ws1cli {

std::filesystem::path lock_path_for(const std::filesystem::path& workload) {
  std::filesystem::path p = workload;
  p.replace_extension(".lock.json");
  return p;
}

ws1::Result<WorkloadContext> WorkloadContext::load(const std::string& workload, bool with_lock) {
  WorkloadContext ctx;
  auto manifest = ws1::load_manifest(workload);
  if (!manifest) return manifest.error();
  ctx.manifest = std::move(manifest).value();
  auto catalogue = ws1::fixture_catalogue(ctx.manifest);
  if (!catalogue) return catalogue.error();
  ctx.catalogue = std::move(catalogue).value();
  ctx.lock_path = lock_path_for(workload);
  if (with_lock) {
    auto lock = ws1::load_fixture_lock(ctx.lock_path);
    if (!lock) return lock.error();
    if (auto st = ws1::check_lock_matches(*lock, ctx.manifest); !st) return st.error();
    ctx.lock = std::move(lock).value();
  }
  return ctx;
}

ws1::Result<const ws1::FixtureSpec*> WorkloadContext::find(const std::string& id) const {
  for (const auto& spec : catalogue)
    if (spec.id == id) return &spec;
  return ws1::bad_input(manifest.file, id,
                        "no such fixture in this workload (see `ws1check fixtures list`)");
}

}  // namespace ws1cli
