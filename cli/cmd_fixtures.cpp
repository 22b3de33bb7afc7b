// `ws1check fixtures list|show|verify|export|import|lock`: the workload's fixtures, their
// pinned hashes, and the safetensors bridge to other tools.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "workload_context.hpp"
#include "ws1/fixture.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/safetensors.hpp"

namespace ws1cli {
namespace {

struct FixturesOptions {
  std::string workload;
  std::string id;
  std::string to;
  std::string file;
  unsigned threads = 0;
};

// Metadata keys ws1check writes into exported files (and reads back on import).
constexpr const char* kMetaFixtureId = "ws1.fixture_id";
constexpr const char* kMetaFixtureHash = "ws1.fixture_hash";
constexpr const char* kMetaWorkload = "ws1.workload_id";
constexpr const char* kMetaSeed = "ws1.seed";
constexpr const char* kMetaGenerator = "ws1.generator";

std::int64_t spec_bytes(const ws1::FixtureSpec& spec) {
  std::int64_t total = 0;
  for (const auto& t : spec.tensors)
    total += ws1::numel(t.shape) * static_cast<std::int64_t>(ws1::dtype_size(t.dtype));
  return total;
}

int run_list(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/false);
  if (!ctx) return report(ctx.error());
  for (const auto& spec : ctx->catalogue) {
    fmt::print("{}  op={} tier={} distribution={} tensors={} bytes={}\n", spec.id, spec.op,
               ws1::tier_name(spec.tier), ws1::distribution_name(spec.distribution),
               spec.tensors.size(), spec_bytes(spec));
  }
  return 0;
}

int run_show(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/true);
  if (!ctx) return report(ctx.error());
  auto spec = ctx->find(o.id);
  if (!spec) return report(spec.error());
  const ws1::FixtureSpec& s = **spec;
  fmt::print("fixture   {}\n", s.id);
  fmt::print("op        {}  tier {}  distribution {}\n", s.op, ws1::tier_name(s.tier),
             ws1::distribution_name(s.distribution));
  fmt::print("workload  {} ({})\n", ctx->manifest.workload_id, ctx->manifest.file);
  fmt::print("case      {}\n", s.case_id.empty() ? "-" : s.case_id);
  fmt::print("seed      {}\n", s.seed);
  const std::string* pinned = ctx->lock ? ctx->lock->hash_of(s.id) : nullptr;
  fmt::print("hash      {} (pinned in {})\n", pinned ? *pinned : "NOT PINNED",
             ctx->lock_path.string());
  fmt::print("tensors\n");
  for (const auto& t : s.tensors) {
    fmt::print("  {:<16} {:<5} {:<22} {:<10} {} key={}\n", t.name,
               ws1::dtype_safetensors_name(t.dtype), ws1::shape_string(t.shape),
               ws1::tensor_role_name(t.role), ws1::gen_kind_name(t.gen.kind), t.gen.key);
  }
  return 0;
}

int run_verify(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/true);
  if (!ctx) return report(ctx.error());
  ws1::FixtureGenerator gen({o.threads});
  std::size_t done = 0;
  for (std::size_t i = 0; i < ctx->catalogue.size(); ++i) {
    const auto& spec = ctx->catalogue[i];
    if (!o.id.empty() && spec.id != o.id) continue;
    gen.retain_only(std::span(ctx->catalogue).subspan(i));
    auto fixture = gen.generate(spec);
    if (!fixture) return report(fixture.error());
    if (auto st = ws1::verify_fixture(*ctx->lock, *fixture); !st) return report(st.error());
    spdlog::debug("verified {}", spec.id);
    fmt::print("ok  {}  {}\n", ws1::fixture_hash(*fixture), spec.id);
    ++done;
  }
  if (done == 0) return report(ws1::bad_input(ctx->manifest.file, o.id, "no such fixture"));
  fmt::print("{} fixture(s) match {}\n", done, ctx->lock_path.string());
  return 0;
}

int run_export(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/true);
  if (!ctx) return report(ctx.error());
  auto spec = ctx->find(o.id);
  if (!spec) return report(spec.error());
  ws1::FixtureGenerator gen({o.threads});
  auto fixture = gen.generate(**spec);
  if (!fixture) return report(fixture.error());
  if (auto st = ws1::verify_fixture(*ctx->lock, *fixture); !st) return report(st.error());
  const std::string hash = ws1::fixture_hash(*fixture);
  ws1::SafetensorsMetadata meta{{kMetaFixtureId, fixture->id},
                                {kMetaFixtureHash, hash},
                                {kMetaWorkload, ctx->manifest.workload_id},
                                {kMetaSeed, std::to_string(fixture->seed)},
                                {kMetaGenerator, std::string(ws1::kFixtureGeneratorVersion)}};
  if (auto st = ws1::write_safetensors(o.to, fixture->tensors, meta); !st)
    return report(st.error());
  fmt::print("wrote {}  {}  {}\n", o.to, hash, fixture->id);
  return 0;
}

int run_import(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/true);
  if (!ctx) return report(ctx.error());
  auto file = ws1::read_safetensors(o.file);
  if (!file) return report(file.error());
  std::string id = o.id;
  if (id.empty()) {
    auto it = file->metadata.find(kMetaFixtureId);
    if (it == file->metadata.end())
      return report(ws1::bad_input(o.file, std::string("__metadata__.") + kMetaFixtureId,
                                   "missing; name the fixture with --id"));
    id = it->second;
  }
  auto spec = ctx->find(id);
  if (!spec) return report(spec.error());
  auto hash = ws1::fixture_hash_for_spec(**spec, file->tensors, o.file);
  if (!hash) return report(hash.error());
  if (auto st = ws1::verify_fixture_hash(*ctx->lock, id, *hash); !st) {
    // Name the imported file first: it is the input at fault, the lock is the yardstick.
    return report(ws1::bad_input(o.file, id, "bytes do not match " + st.error().message()));
  }
  fmt::print("ok  {}  {}  ({} matches the lock)\n", *hash, id, o.file);
  return 0;
}

int run_lock(const FixturesOptions& o) {
  auto ctx = WorkloadContext::load(o.workload, /*with_lock=*/false);
  if (!ctx) return report(ctx.error());
  auto lock = ws1::compute_fixture_lock(ctx->manifest, ctx->catalogue, {o.threads});
  if (!lock) return report(lock.error());
  if (auto st = ws1::write_fixture_lock(ctx->lock_path, *lock); !st) return report(st.error());
  fmt::print("wrote {} ({} fixtures)\n", ctx->lock_path.string(), lock->fixtures.size());
  return 0;
}

void add_workload(CLI::App* sub, FixturesOptions& o) {
  sub->add_option("--workload", o.workload, "workload manifest")->default_str(default_workload());
  sub->add_option("--threads", o.threads, "generator threads (0: all cores)");
}

}  // namespace

Command register_fixtures(CLI::App& app) {
  auto o = std::make_shared<FixturesOptions>();
  auto* sub = app.add_subcommand("fixtures", "the workload's generated inputs and their pins");
  sub->require_subcommand(1);

  auto* list = sub->add_subcommand("list", "fixture ids of the workload, one per line");
  add_workload(list, *o);
  auto* show = sub->add_subcommand("show", "tensors, seed and pinned hash of one fixture");
  show->add_option("id", o->id, "fixture id")->required();
  add_workload(show, *o);
  auto* verify = sub->add_subcommand("verify", "regenerate fixtures and check them against the lock");
  verify->add_option("--id", o->id, "only this fixture");
  add_workload(verify, *o);
  auto* exp = sub->add_subcommand("export", "write one fixture as safetensors");
  exp->add_option("id", o->id, "fixture id")->required();
  exp->add_option("--to", o->to, "output .safetensors file")->required();
  add_workload(exp, *o);
  auto* imp = sub->add_subcommand("import", "check a safetensors file's bytes against the lock");
  imp->add_option("file", o->file, "input .safetensors file")->required();
  imp->add_option("--id", o->id, "fixture id (default: from the file's metadata)");
  add_workload(imp, *o);
  auto* lock = sub->add_subcommand("lock", "maintainers: regenerate the workload's lock file");
  add_workload(lock, *o);

  return {sub, [o, list, show, verify, exp, imp, lock] {
            if (o->workload.empty()) o->workload = default_workload();
            if (list->parsed()) return run_list(*o);
            if (show->parsed()) return run_show(*o);
            if (verify->parsed()) return run_verify(*o);
            if (exp->parsed()) return run_export(*o);
            if (imp->parsed()) return run_import(*o);
            if (lock->parsed()) return run_lock(*o);
            return exit_code(ws1::ExitCode::kBadInput);
          }};
}

}  // namespace ws1cli
