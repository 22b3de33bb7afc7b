// `ws1check env`: what this build and machine are, and (with --contract) whether a contract
// loads; its version and hash, and what it changes against the shipped contract in force.
#include <fmt/core.h>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "ws1/contract.hpp"
#include "ws1/contract_diff.hpp"
#include "ws1/evidence.hpp"

namespace ws1cli {
namespace {

struct EnvOptions {
  bool json = false;
  std::string contract;
};

std::string yes_no_dirty(bool dirty) { return dirty ? "dirty" : "clean"; }

// A --contract file other than the default, against the default: what a reviewer of a new
// contract version needs to see before it is put in force.
struct DefaultComparison {
  ws1::Contract base;  // the contract in force
  bool identical = false;  // the same bytes
  std::vector<ws1::ContractRowDiff> rows;
};

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  const auto ca = std::filesystem::weakly_canonical(a, ec_a);
  const auto cb = std::filesystem::weakly_canonical(b, ec_b);
  return !ec_a && !ec_b && ca == cb;
}

// nullopt where `contract` is the default itself. Errors: the default does not load.
ws1::Result<std::optional<DefaultComparison>> compare_with_default(const ws1::Contract& contract) {
  const std::string default_path = default_contract();
  if (same_file(contract.file, default_path)) return std::optional<DefaultComparison>{};
  auto base = ws1::load_contract(default_path);
  if (!base) return base.error();
  DefaultComparison cmp{std::move(base).value(), false, {}};
  cmp.identical = cmp.base.sha256 == contract.sha256;
  if (!cmp.identical) {
    auto rows = ws1::diff_contract_files(default_path, contract.file);
    if (!rows) return rows.error();
    cmp.rows = std::move(rows).value();
  }
  return std::optional<DefaultComparison>{std::move(cmp)};
}

void print_comparison(const DefaultComparison& cmp) {
  if (cmp.identical) {
    fmt::print("identical to the contract in force\n");
    return;
  }
  fmt::print("differences from {} ({}): {} row{}{}\n", cmp.base.file, cmp.base.version,
             cmp.rows.size(), cmp.rows.size() == 1 ? "" : "s",
             cmp.rows.empty() ? " (the same values, written differently)" : "");
  for (const auto& r : cmp.rows)
    fmt::print("  {}: {} -> {}\n", r.path, r.base.value_or("(absent)"),
               r.other.value_or("(absent)"));
}

// The context JSON with `contract_diff` appended; the values stay the compact JSON text of the
// rows (null: absent), so an absent leaf and a JSON null are told apart.
std::string with_comparison(const std::string& context_json, const DefaultComparison& cmp) {
  using ojson = nlohmann::ordered_json;
  ojson j = ojson::parse(context_json);
  ojson rows = ojson::array();
  auto text = [](const std::optional<std::string>& v) { return v ? ojson(*v) : ojson(nullptr); };
  for (const auto& r : cmp.rows)
    rows.push_back(ojson{{"path", r.path}, {"base", text(r.base)}, {"other", text(r.other)}});
  j["contract_diff"] = ojson{
      {"base", {{"path", cmp.base.file}, {"version", cmp.base.version}, {"sha256", cmp.base.sha256}}},
      {"rows", std::move(rows)}};
  // The same layout as evidence_context_json's.
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

void print_text(const ws1::Evidence& e, const ws1::Contract& c) {
  const auto& env = e.environment;
  fmt::print("ws1check {}\n", e.tool.version);
  fmt::print("  source     {} ({})\n", e.tool.source_commit,
             e.tool.source_dirty ? yes_no_dirty(*e.tool.source_dirty) : "unknown");
  if (e.checkout)
    fmt::print("  checkout   {} ({})\n", e.checkout->commit, yes_no_dirty(e.checkout->dirty));
  else
    fmt::print("  checkout   none (the working directory is not in a git checkout)\n");
  fmt::print("  compiler   {} ({}, cuda {})\n", env.compiler, env.build_type,
             env.built_with_cuda ? "yes" : "no");
  fmt::print("  host       {} | {} | {} {}\n", env.host.hostname, env.host.os, env.host.kernel,
             env.host.arch);
  fmt::print("  cpu        {} ({} logical cores, {:.1f} GiB)\n", env.host.cpu_model,
             env.host.logical_cores,
             static_cast<double>(env.host.memory_total_bytes) / (1024.0 * 1024.0 * 1024.0));
  if (env.gpu) {
    const auto& g = *env.gpu;
    fmt::print("  gpu        {} (cc {}, {} SMs, {:.0f} GiB), driver CUDA {}, runtime {}, cuBLAS {}\n",
               g.name, g.compute_capability, g.sm_count,
               static_cast<double>(g.memory_bytes) / (1024.0 * 1024.0 * 1024.0), g.driver_version,
               g.cuda_runtime_version, g.cublas_version);
    fmt::print("  cublas     {} (tf32 {})\n", g.cublas_math_mode, g.tf32_enabled ? "on" : "off");
  } else {
    fmt::print("  gpu        none ({})\n", env.gpu_absent_reason);
  }
  fmt::print("  backend    {} (default)\n", env.backend);
  fmt::print("  contract   {}\n", c.file);
  fmt::print("             version {}, sha256 {}\n", c.version, c.sha256);
  const auto undeclared = c.undeclared();
  if (undeclared.empty()) {
    fmt::print("             declarations: all present\n");
  } else {
    fmt::print("             undeclared: {}\n", fmt::join(undeclared, ", "));
  }
}

}  // namespace

Command register_env(CLI::App& app) {
  auto o = std::make_shared<EnvOptions>();
  auto* sub = app.add_subcommand("env", "this build, this machine, and the contract in force");
  sub->add_flag("--json", o->json, "print JSON (the evidence artifact's context block)");
  sub->add_option("--contract", o->contract, "load and validate this contract")
      ->default_str(default_contract());
  return {sub, [o] {
            const std::string path = o->contract.empty() ? default_contract() : o->contract;
            auto contract = ws1::load_contract(path);
            if (!contract) return report(contract.error());
            // Compared before anything is printed, so a failure leaves stdout empty.
            std::optional<DefaultComparison> cmp;
            if (!o->contract.empty()) {
              auto c = compare_with_default(*contract);
              if (!c) return report(c.error());
              cmp = std::move(c).value();
            }
            ws1::Evidence e = ws1::begin_evidence(cli_argv());
            fill_gpu_environment(e.environment);
            e.contract = {contract->file, contract->version, contract->sha256};
            if (o->json) {
              const std::string context = ws1::evidence_context_json(e);
              // Only a contract that differs from the one in force gets the key.
              fmt::print("{}", cmp && !cmp->identical ? with_comparison(context, *cmp) : context);
            } else {
              print_text(e, *contract);
              if (cmp) print_comparison(*cmp);
            }
            return 0;
          }};
}

}  // namespace ws1cli
