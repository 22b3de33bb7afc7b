// The gate's parity stage: see gate_parity.hpp.
#include "gate_parity.hpp"

#include <fmt/core.h>

#include "parity_model.hpp"
#include "ws1/parity.hpp"

namespace ws1cli {

ws1::Result<ws1::GateStage> parity_stage(const std::string& model, const std::vector<std::unique_ptr<Session>>& sessions,
                                         unsigned threads, std::vector<ws1::Cell>& cells) {
  const ws1::Manifest& m = sessions.front()->workload.manifest;
  auto weights = open_model(model, m, threads);
  if (!weights) return weights.error();
  const ws1::ParityFixture fixture = ws1::manifest_parity_fixture(m);
  if (ws1::Status st = ws1::check_fixture(fixture, weights->config, m.file); !st) return st.error();
  ws1::GateStage stage{"parity", ws1::StageStatus::kPassed, "", {}};
  int red = 0;
  for (const auto& s : sessions) {
    // The defaults: the FP32 reference chain on, not strict, one sequence at a time.
    auto run = ws1::run_parity(*weights, *s->backend, s->run.op_context, fixture, ws1::ParityOptions{});
    if (!run) return run.error();
    const ws1::ParityCellInputs in{&s->contract, &*weights, &fixture, &*run,
                                   {s->run.expected_backend, s->backend->name()}, chain_kernel_id(*s->backend)};
    auto cell = ws1::parity_cell(in);
    if (!cell) return cell.error();
    double max_abs = 0;
    for (const ws1::MetricResult& metric : cell->metrics)
      if (metric.name == "max_abs_dlogp") max_abs = metric.value;
    const bool green = cell->verdict == ws1::Verdict::kGreen;
    red += green ? 0 : 1;
    stage.rows.push_back({cell->id, green ? "green" : "red",
                          green ? fmt::format("{} active tokens, max |dlogp| {:.6g}", fixture.active_tokens(), max_abs)
                                : cell->reason});
    cells.push_back(std::move(cell).value());
  }
  if (red > 0) stage.status = ws1::StageStatus::kFailed;
  stage.detail = fmt::format("manifest protocol ({} active tokens), {}{}: {} of {} backends green", fixture.active_tokens(),
                             weights->label,
                             weights->synthetic ? " (synthetic weights: not the WS1 chain gate)" : "",
                             sessions.size() - static_cast<std::size_t>(red), sessions.size());
  return stage;
}

}  // namespace ws1cli
