// `ws1check ops`: the op catalogue; with --op X, also the tensors X takes (the names, dtypes
// and shapes `accuracy --inputs` expects) and what it produces.
#include <fmt/core.h>

#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "ops_matrix.hpp"
#include "workload_context.hpp"
#include "ws1/op.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/runner.hpp"

namespace ws1cli {
namespace {

struct OpsOptions {
  std::string op, workload;
  bool matrix = false;
};

std::string decl_list(const std::vector<ws1::TensorDecl>& decls) {
  std::string s;
  for (const auto& d : decls)
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", d.name,
                     ws1::dtype_safetensors_name(d.candidate_dtype));
  return s.empty() ? "-" : s;
}

// The tensors of one op, from the workload's fixture catalogue.
int print_tensors(const OpsOptions& o) {
  auto ctx = WorkloadContext::load(o.workload.empty() ? default_workload() : o.workload, false);
  if (!ctx) return report(ctx.error());
  const auto decls = ws1::op_input_decls(ctx->catalogue, o.op);
  if (decls.empty())
    return report(ws1::bad_input(ctx->manifest.file, o.op, "no fixture of this op"));
  const ws1::Tier tiers[] = {ws1::Tier::kShort, ws1::Tier::kPrimary, ws1::Tier::kLong};
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"name", "dtype", "role", "needed by", "short", "primary", "long"});
  for (const auto& d : decls) {
    std::vector<std::string> r{d.name, std::string(ws1::dtype_safetensors_name(d.dtype)),
                               std::string(ws1::tensor_role_name(d.role)),
                               d.optional                               ? "optional"
                               : d.role == ws1::TensorRole::kGradSeed ? "bwd"
                                                                        : "fwd, bwd"};
    for (ws1::Tier t : tiers) {
      std::string shape = "-";
      for (const auto& [tier, s] : d.shapes)
        if (tier == t) shape = ws1::shape_string(s);
      r.push_back(shape);
    }
    rows.push_back(std::move(r));
  }
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  fmt::print("\ntensors {} takes (accuracy --inputs: these names and dtypes; shapes of the "
             "fixtures of {}):\n",
             o.op, ctx->manifest.file);
  for (const auto& r : rows) {
    std::string line = " ";
    for (std::size_t i = 0; i < r.size(); ++i) line += fmt::format(" {:<{}}", r[i], width[i]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    fmt::print("{}\n", line);
  }
  for (const auto& d : decls)
    if (!d.note.empty()) fmt::print("  {}: {}\n", d.name, d.note);
  if (const ws1::Op* impl = ws1::find_op_impl(o.op)) {
    fmt::print("outputs (candidate dtype; the reference gives F32 for floats): {}\n",
               decl_list(impl->outputs()));
    fmt::print("gradients (candidate dtype; the reference gives F32 for floats): {}\n",
               decl_list(impl->gradients()));
  }
  return 0;
}

}  // namespace

Command register_ops(CLI::App& app) {
  auto o = std::make_shared<OpsOptions>();
  auto* sub = app.add_subcommand("ops", "the op catalogue (DESIGN §6)");
  sub->add_option("--op", o->op, "show one op, with the tensors it takes and produces");
  sub->add_option("--workload", o->workload, "workload manifest (shapes shown with --op)")
      ->default_str(default_workload());
  sub->add_flag("--matrix", o->matrix,
                "the cells accuracy and invariance judge for the workload, N/A ones with reasons");
  return {sub, [o] {
            if (!o->op.empty() && !ws1::find_op(o->op)) {
              return report(ws1::bad_input("--op", o->op, "unknown op (see `ws1check ops`)"));
            }
            if (o->matrix) return print_matrix(o->workload, o->op);
            fmt::print("{:<22} {:<12} {:<4} {}\n", "op", "class", "C8", "forward | backward");
            for (const auto& info : ws1::op_catalogue()) {
              if (!o->op.empty() && info.name != o->op) continue;
              fmt::print("{:<22} {:<12} {:<4} {} | {}\n", info.name, info.op_class,
                         info.c8_required ? "yes" : "opt", info.forward, info.backward);
            }
            return o->op.empty() ? 0 : print_tensors(*o);
          }};
}

}  // namespace ws1cli
