// `ws1check ops --matrix`: every cell `accuracy` and `invariance` would judge for a workload,
// with the reason of each N/A cell — computed from the same catalogue and rules the runners use.
#include "ops_matrix.hpp"

#include <fmt/core.h>

#include "common.hpp"
#include "workload_context.hpp"
#include "ws1/invariance.hpp"
#include "ws1/op.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/plan.hpp"

namespace ws1cli {
namespace {

void row(const std::string& cell, std::string_view verdict, const std::string& why) {
  fmt::print("{:<62} {:<8} {}\n", cell, verdict, why);
}

// Whether the op's backward returns the gradient of a parameter (its own `…/parameters` cell).
bool has_parameter_gradient(const ws1::Op& op, const ws1::FixtureSpec& spec) {
  for (const auto& g : op.gradients())
    for (const auto& t : spec.tensors)
      if (t.role == ws1::TensorRole::kParameter && g.name == "d" + t.name) return true;
  return false;
}

}  // namespace

int print_matrix(const std::string& workload, const std::string& op_filter) {
  auto ctx = WorkloadContext::load(workload.empty() ? default_workload() : workload, false);
  if (!ctx) return report(ctx.error());
  fmt::print("{:<62} {:<8} {}\n", "cell (judgment/op/fixture or transform)", "judged", "N/A reason");
  for (const auto& info : ws1::op_catalogue()) {
    if (!op_filter.empty() && info.name != op_filter) continue;
    const ws1::Op* op = ws1::find_op_impl(info.name);
    if (op == nullptr) {
      row(std::string(info.name), "N/A", "no implementation in this build");
      continue;
    }
    auto steps = ws1::plan_cells(ctx->catalogue, ctx->manifest.file, ws1::whole_matrix({op}));
    if (!steps) return report(steps.error());
    for (const ws1::PlannedStep& step : *steps) {
      const ws1::Judgment j = step.judgment;
      const ws1::Direction d = ws1::direction_of(j);
      if (!step.invariance()) {
        const std::string id = fmt::format("{}/{}", ws1::contract_name(j), step.fixture->id);
        if ((d == ws1::Direction::kBackward ? op->gradients() : op->outputs()).empty())
          row(id, "N/A", fmt::format("{} has no backward", info.name));
        else
          row(id, "yes", "");
        continue;
      }
      const std::string family = ws1::invariance_family_prefix(*step.fixture);
      const bool params = d == ws1::Direction::kBackward && has_parameter_gradient(*op, *step.fixture);
      for (ws1::Transform t : step.transforms) {
        const std::string id = fmt::format("{}/{}/{}{}", ws1::contract_name(j), info.name, family,
                                           ws1::transform_name(t));
        auto na = ws1::transform_not_applicable(*op, t, d);
        if (!na && t == ws1::Transform::kBnPermuted && !ctx->manifest.permutation_enabled)
          na = ws1::NotApplicable{"the workload disables batch_permutation"};
        row(id, na ? "N/A" : "yes", na ? na->reason : "");
        if (params && !na)
          row(id + "/parameters", ws1::transform_judges_parameters(t) ? "yes" : "N/A",
              ws1::transform_judges_parameters(t) ? "" : std::string(ws1::kParametersRegroupedReason));
      }
    }
  }
  return 0;
}

}  // namespace ws1cli
