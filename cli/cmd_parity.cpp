// `ws1check parity`: chain-level logprob parity (spec §8, DESIGN §6a) of a Qwen3 dense chain on
// the selected backend: teacher forcing (lhs) against rollout decode (rhs), d = lhs - rhs, the
// contract's aggregates; a table, the evidence artifact with its per-token safetensors, exit 0/1.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "run_session.hpp"
#include "run_support.hpp"
#include "ws1/parity.hpp"
#include "ws1/safetensors.hpp"

namespace ws1cli {
namespace {

struct ParityOptions {
  std::string model, fixture = "manifest";
  std::string backend, contract, workload, out = "ws1check-out";
  std::vector<std::uint64_t> seeds = {1, 2, 3};
  std::vector<std::int64_t> prompt_lens = {16}, response_lens = {32};
  std::vector<double> logit_scales = {1.0};
  std::int64_t sequences = 4;
  double temperature = 1.0;
  std::string rms_norm_order = "contract";
  bool strict = false, json = false, batched_decode = false;
  unsigned threads = 0;
  std::vector<std::string> sweep_given;  // sweep-only options on the command line
};

constexpr std::string_view kSyntheticPrefix = "synthetic:";

// --model: synthetic weights from the manifest seed, or a snapshot verified against the
// manifest's pins (its config must be the manifest's: no shrunk architecture, NOTES §e).
ws1::Result<ws1::ModelWeights> open_model(const std::string& model, const ws1::Manifest& m, unsigned threads) {
  if (model.empty()) return ws1::bad_input("--model", "", "required: synthetic:tiny, synthetic:qwen3-8b or a snapshot directory");
  if (model.starts_with(kSyntheticPrefix)) {
    const std::string name = model.substr(kSyntheticPrefix.size());
    auto config = ws1::synthetic_config(name);
    if (!config) return config.error();
    return ws1::synthetic_weights(*config, name, {static_cast<std::uint64_t>(m.seed), threads});
  }
  auto config = ws1::read_hf_config(model);
  if (!config) return config.error();
  if (auto diff = ws1::config_difference(*config, m.model.config))
    return ws1::bad_input(model + "/config.json", "",
                          fmt::format("is not the manifest's model ({}): {} (exit_forbids_architecture_shrink)",
                                      m.model.model_id, *diff));
  spdlog::info("verifying {} against the manifest's pinned shard hashes", model);
  return ws1::load_hf_checkpoint(model, m.model.weights);
}

ws1::Result<ws1::ParityFixture> open_fixture(const ParityOptions& o, const Session& s, const ws1::ModelWeights& w,
                                             const ws1::OpContext& ctx) {
  if (o.fixture == "manifest") {
    if (!o.sweep_given.empty())
      return ws1::bad_input("--fixture", "manifest", o.sweep_given.front() + " applies to --fixture sweep only");
    ws1::ParityFixture f = ws1::manifest_parity_fixture(s.workload.manifest);
    if (ws1::Status st = ws1::check_fixture(f, w.config, s.workload.manifest.file); !st) return st.error();
    return f;
  }
  if (o.fixture != "sweep") return ws1::bad_input("--fixture", o.fixture, "expected manifest or sweep");
  ws1::SweepOptions sw;
  sw.seeds = o.seeds;
  for (std::int64_t p : o.prompt_lens)
    for (std::int64_t r : o.response_lens) sw.lengths.emplace_back(p, r);
  sw.logit_scales = o.logit_scales;
  sw.sequences = o.sequences;
  sw.temperature = o.temperature;
  return ws1::sweep_parity_fixture(w, *s.backend, ctx, sw);
}

ws1::Result<ws1::OpContext> op_context(const ParityOptions& o, const Session& s) {
  ws1::OpContext ctx = s.run.op_context;
  if (o.rms_norm_order == "contract") return ctx;
  auto order = ws1::rms_norm_order_from_name(o.rms_norm_order);
  if (!order) return ws1::bad_input("--rms-norm-order", o.rms_norm_order, "expected contract, kernel or hf");
  spdlog::warn("rms_norm order {} instead of the contract's (--rms-norm-order)", o.rms_norm_order);
  ctx.rms_norm_order = *order;
  return ctx;
}

std::string chain_kernel_id(ws1::Backend& b) {
  std::string id;
  for (std::string_view op : {"embedding", "rms_norm", "det_gemm", "qk_norm", "rope", "attention", "swiglu", "linear_logp"})
    id += (id.empty() ? "" : " ") + b.kernel_id(*ws1::find_op_impl(op), ws1::Direction::kForward);
  return id;
}

void print_table(const ws1::Cell& c, const ws1::ModelWeights& w, const ws1::ParityFixture& f,
                 const ws1::ParityRun& run, const std::string& tokens_path) {
  fmt::print("chain parity: lhs teacher forcing, rhs {}rollout decode, d = lhs - rhs (contract dlogp_definition)\n",
             run.batched_decode ? "batched " : "");
  fmt::print("model    {} [{}]{}\n", w.label, w.hash,
             w.synthetic ? " -- synthetic weights: not the WS1 chain gate" : "");
  fmt::print("fixture  {}: {} sequences, {} active tokens, hash {}\n", f.protocol, f.sequences.size(),
             f.active_tokens(), f.hash());
  std::size_t width = 6;
  for (const ws1::MetricResult& m : c.metrics) width = std::max(width, m.name.size());
  fmt::print("{:<{}}  {:>13}  {:>10}\n", "metric", width, "value", "threshold");
  for (const ws1::MetricResult& m : c.metrics) {
    const bool ok = !m.threshold || m.value <= *m.threshold;
    fmt::print("{:<{}}  {:>13.6g}  {:>10}  {}\n", m.name, width, m.value,
               m.threshold ? fmt::format("{:.6g}", *m.threshold) : "-",
               m.threshold ? (ok ? "pass" : "FAIL") : "reported");
  }
  if (run.strict) {
    const std::int64_t zeros = c.bitwise.empty() ? 0 : static_cast<std::int64_t>(run.tokens.size()) - c.bitwise[0].mismatches;
    fmt::print("strict: d exactly 0 at {} of {} active tokens; {}\n", zeros, run.tokens.size(),
               run.drift ? "first drift " + *run.drift_sequence + ", " + run.drift->text()
                         : std::string("no hidden state differs"));
  }
  fmt::print("per-token dlogp: {}\n", tokens_path);
}

int run(const ParityOptions& o) {
  auto session = open_session({o.backend, o.contract, o.workload, o.threads});
  if (!session) return report(session.error());
  Session& s = **session;
  auto ctx = op_context(o, s);
  if (!ctx) return report(ctx.error());
  auto weights = open_model(o.model, s.workload.manifest, o.threads);
  if (!weights) return report(weights.error());
  auto fixture = open_fixture(o, s, *weights, *ctx);
  if (!fixture) {
    if (fixture.error().code != ws1::ExitCode::kRed) return report(fixture.error());
    spdlog::error("the candidate chain failed while sampling the sweep: {}", fixture.error().message());
    return exit_code(ws1::ExitCode::kRed);
  }
  spdlog::info("{} protocol: {} sequences, {} active tokens on {}", fixture->protocol, fixture->sequences.size(),
               fixture->active_tokens(), s.backend->name());
  auto parity = ws1::run_parity(*weights, *s.backend, *ctx, *fixture, {o.strict, true, o.batched_decode});
  if (!parity) return report(parity.error());

  ws1::ParityCellInputs in{&s.contract, &*weights, &*fixture, &*parity,
                           {s.run.expected_backend, s.backend->name()}, chain_kernel_id(*s.backend)};
  auto cell = ws1::parity_cell(in);
  if (!cell) return report(cell.error());
  if (o.rms_norm_order != "contract") cell->id += "/rms_norm_order=" + o.rms_norm_order;
  const std::string name = "parity-" + s.backend->name();
  auto tensors = ws1::parity_token_tensors(in);
  if (!tensors) return report(tensors.error());
  const std::filesystem::path tokens_path = std::filesystem::path(o.out) / (name + ".tokens.safetensors");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ws1::Status st = ws1::write_safetensors(tokens_path, *tensors, ws1::parity_token_metadata(in)); !st)
    return report(st.error());
  if (!o.json) print_table(*cell, *weights, *fixture, *parity, tokens_path.string());
  s.evidence.cells.push_back(std::move(cell).value());
  return finish_run(s.evidence, o.out, name, o.json);
}

}  // namespace

Command register_parity(CLI::App& app) {
  auto o = std::make_shared<ParityOptions>();
  auto* sub = app.add_subcommand("parity", "chain-level teacher forcing vs rollout decode parity");
  sub->add_option("--model", o->model, "synthetic:tiny | synthetic:qwen3-8b | PATH (Hugging Face snapshot)");
  sub->add_option("--fixture", o->fixture, "manifest (the gate: s0..s3) | sweep (spec §8.1)")->default_str("manifest");
  const std::vector<CLI::Option*> sweep_only = {
      sub->add_option("--seeds", o->seeds, "sweep: prompt and sampling seeds")->delimiter(',')->default_str("1,2,3"),
      sub->add_option("--prompt-len", o->prompt_lens, "sweep: prompt lengths")->delimiter(',')->default_str("16"),
      sub->add_option("--response-len", o->response_lens, "sweep: response lengths")->delimiter(',')->default_str("32"),
      sub->add_option("--logit-scales", o->logit_scales, "sweep: lm_head multipliers (powers of two)")
          ->delimiter(',')->default_str("1"),
      sub->add_option("--sequences", o->sequences, "sweep: sequences per seed, length pair and logit scale")
          ->default_str("4"),
      sub->add_option("--temperature", o->temperature, "sweep: sampling temperature (0: greedy)")->default_str("1")};
  sub->add_option("--rms-norm-order", o->rms_norm_order, "contract | kernel | hf")->default_str("contract");
  sub->add_flag("--strict", o->strict, "also require d == 0 exactly; localise the first bitwise drift");
  sub->add_flag("--batched-decode", o->batched_decode,
                "rhs decodes the sequences together (several lengths in flight, key_mask)");
  add_run_options(sub, o->backend, o->contract, o->workload, o->out, o->json, o->threads);
  return {sub, [o, sweep_only] {
            for (const CLI::Option* opt : sweep_only)
              if (opt->count() > 0) o->sweep_given.push_back(opt->get_name());
            return run(*o);
          }};
}

}  // namespace ws1cli
