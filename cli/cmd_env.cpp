// `ws1check env`: what this build and machine are, and (with --contract) whether a contract
// loads; its version and hash.
#include <fmt/core.h>
#include <fmt/format.h>

#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"

namespace ws1cli {
namespace {

struct EnvOptions {
  bool json = false;
  std::string contract;
};

std::string yes_no_dirty(bool dirty) { return dirty ? "dirty" : "clean"; }

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
            ws1::Evidence e = ws1::begin_evidence(cli_argv());
            fill_gpu_environment(e.environment);
            e.contract = {contract->file, contract->version, contract->sha256};
            if (o->json)
              fmt::print("{}", ws1::evidence_context_json(e));
            else
              print_text(e, *contract);
            return 0;
          }};
}

}  // namespace ws1cli
