// `ws1check parity`: chain-level logprob parity (spec §8, DESIGN §6a) of a Qwen3 dense chain on
// the selected backend: teacher forcing (lhs) against rollout decode (rhs), d = lhs - rhs, the
// contract's aggregates; a table, the evidence artifact with its per-token safetensors, exit 0/1.
// --fixture kv runs the C6/C7 decode-vs-prefill attention cases instead (ws1/kv_consistency.hpp);
// --logprobs judges the two sides' logprobs measured elsewhere (a trainer's, an inference engine's).
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "run_session.hpp"
#include "parity_model.hpp"
#include "run_support.hpp"
#include "ws1/kv_consistency.hpp"
#include "ws1/parity.hpp"
#include "ws1/safetensors.hpp"

namespace ws1cli {
namespace {

struct ParityOptions {
  std::string model, fixture = "manifest", logprobs;
  std::string backend, contract, workload, out = "ws1check-out";
  std::vector<std::uint64_t> seeds = {1, 2, 3};
  std::vector<std::int64_t> prompt_lens = {16}, response_lens = {32};
  std::vector<double> logit_scales = {1.0};
  std::int64_t sequences = 4;
  double temperature = 1.0;
  std::string rms_norm_order = "contract", rollout_rms_norm_order;
  bool strict = false, json = false, batched_decode = false, no_reference = false, unpinned = false;
  unsigned threads = 0;
  std::vector<std::string> sweep_given;  // sweep-only options on the command line
  std::vector<std::string> chain_given;  // options that run a chain (refused with --logprobs)
};

ws1::Result<ws1::ParityFixture> open_fixture(const ParityOptions& o, const Session& s, const ws1::ModelWeights& w,
                                             const ws1::OpContext& ctx) {
  if (o.fixture == "manifest") {
    if (!o.sweep_given.empty())
      return ws1::bad_input("--fixture", "manifest", o.sweep_given.front() + " applies to --fixture sweep only");
    ws1::ParityFixture f = ws1::manifest_parity_fixture(s.workload.manifest);
    if (ws1::Status st = ws1::check_fixture(f, w.config, s.workload.manifest.file); !st) return st.error();
    return f;
  }
  if (o.fixture != "sweep") return ws1::bad_input("--fixture", o.fixture, "expected manifest, sweep or kv");
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

constexpr std::string_view kHistogram = "abs_dlogp_tokens";

// The metrics with their thresholds (the |d| histogram apart, see print_histogram).
void print_metrics(const ws1::Cell& c) {
  std::size_t width = 6;
  for (const ws1::MetricResult& m : c.metrics) width = std::max(width, m.name.size());
  fmt::print("{:<{}}  {:>13}  {:>10}\n", "metric", width, "value", "threshold");
  for (const ws1::MetricResult& m : c.metrics) {
    if (m.name.starts_with(kHistogram)) continue;
    const bool ok = !m.threshold || m.value <= *m.threshold;
    fmt::print("{:<{}}  {:>13.6g}  {:>10}  {}\n", m.name, width, m.value,
               m.threshold ? fmt::format("{:.6g}", *m.threshold) : "-",
               m.threshold ? (ok ? "pass" : "FAIL") : "reported");
  }
}

void print_table(const ws1::Cell& c, const ws1::ModelWeights& w, const ws1::ParityFixture& f,
                 const ws1::ParityRun& run, const std::string& tokens_path) {
  fmt::print("chain parity: lhs teacher forcing, rhs {}rollout decode, d = lhs - rhs (contract dlogp_definition)\n",
             run.batched_decode ? "batched " : "");
  const std::string note = ws1::not_gate_note(w);
  fmt::print("model    {} [{}]{}\n", w.label, w.hash, note.empty() ? "" : " -- " + note);
  if (!w.synthetic && !w.pinned) fmt::print("snapshot {}\n", ws1::snapshot_record(w.snapshot));
  fmt::print("fixture  {}: {} sequences, {} active tokens, hash {}\n", f.protocol, f.sequences.size(),
             f.active_tokens(), f.hash());
  print_metrics(c);
  if (!run.tokens.empty() && std::isnan(run.tokens.front().reference))
    fmt::print("FP32 reference chain: not run (--no-reference)\n");
  if (run.strict) {
    const std::int64_t zeros = c.bitwise.empty() ? 0 : static_cast<std::int64_t>(run.tokens.size()) - c.bitwise[0].mismatches;
    fmt::print("strict: d exactly 0 at {} of {} active tokens; {}\n", zeros, run.tokens.size(),
               run.drift ? "first drift " + *run.drift_sequence + ", " + run.drift->text()
                         : std::string("no hidden state differs"));
  }
  fmt::print("per-token dlogp: {}\n", tokens_path);
}

// ---- --fixture kv ------------------------------------------------------------------------------

// The head shape's config: --model's (synthetic:<name>, or a snapshot's config.json), else the
// manifest's model. No weights are read: the cases are attention alone.
ws1::Result<std::pair<ws1::ModelConfig, std::string>> kv_config(const std::string& model, const ws1::Manifest& m,
                                                                 bool unpinned) {
  if (model.empty()) return std::pair{m.model.config, m.model.model_id + " (the manifest's model)"};
  auto config = model.starts_with(kSyntheticPrefix) ? ws1::synthetic_config(model.substr(kSyntheticPrefix.size()))
                                                    : snapshot_config(model, m, unpinned);
  if (!config) return config.error();
  if (ws1::Status st = ws1::check_config(*config, model); !st) return st.error();
  return std::pair{*config, model};
}

const ws1::MetricResult* metric(const ws1::Cell& c, std::string_view name) {
  for (const ws1::MetricResult& m : c.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

std::string metric_text(const ws1::Cell& c, std::string_view name) {
  const ws1::MetricResult* m = metric(c, name);
  return m == nullptr ? "-" : fmt::format("{:.4g}", m->value);
}

// One line per case: the attention cell (bits, error against prefill, read-back) and the probe.
void print_kv_row(const ws1::KvCaseInputs& in, const ws1::Cell& rows, const ws1::Cell& probe) {
  const ws1::KvCase& c = in.kv_case;
  std::string bits = "-", err = "-", readback = "-";
  if (!rows.accuracy.empty()) {
    const ws1::MetricResult* equal = metric(rows, "bitwise_equal_elements");
    bits = fmt::format("{:.0f}/{}", equal != nullptr ? equal->value : 0.0, rows.accuracy[0].numel);
    err = fmt::format("{:.3g} ({:.3g})", rows.accuracy[0].abs_error.max,
                      rows.accuracy[0].worst ? rows.accuracy[0].worst->margin : 0.0);
    readback = rows.bitwise.size() >= 2 && rows.bitwise[0].equal_bits && rows.bitwise[1].equal_bits ? "equal" : "DIFFERS";
  }
  const std::string padding = c.padding == ws1::KvPadding::kLeft ? "left" : c.padding == ws1::KvPadding::kRight ? "right" : "-";
  fmt::print("{:<22} {:<6} {:<5} {:>4}  {:>17}  {:>17}  {:<8} {:>4}  {:>9} {:>9} {:>9}  {}/{}\n", c.name,
             fmt::format("{}x{}", c.lengths.size(), c.padded_len), padding, in.rows(), bits, err, readback, metric_text(probe, "active_tokens"),
             metric_text(probe, "max_abs_dlogp"), metric_text(probe, "approx_kl0"), metric_text(probe, "clipfrac0"),
             ws1::verdict_name(rows.verdict), ws1::verdict_name(probe.verdict));
}

int run_kv(const ParityOptions& o, Session& s, const ws1::OpContext& run_ctx) {
  if (!o.sweep_given.empty()) return report(ws1::bad_input("--fixture", "kv", o.sweep_given.front() + " applies to --fixture sweep only"));
  if (o.batched_decode) return report(ws1::bad_input("--fixture", "kv", "--batched-decode applies to the chain (manifest, sweep)"));
  if (o.rms_norm_order != "contract" || !o.rollout_rms_norm_order.empty())
    return report(ws1::bad_input("--fixture", "kv", "--rms-norm-order applies to the chain (the kv cases are attention alone)"));
  const ws1::Manifest& m = s.workload.manifest;
  auto config = kv_config(o.model, m, o.unpinned);
  if (!config) return report(config.error());
  auto cases = ws1::kv_consistency_cases(m);
  if (!cases) return report(cases.error());
  const ws1::OpContext ctx = ws1::model_op_context(config->first, run_ctx);
  ws1::Backend& b = *s.backend;
  const std::string attention = b.kernel_id(*ws1::find_op_impl("attention"), ws1::Direction::kForward);
  const ws1::KvCellInputs ci{&s.run, b.name(), attention,
                             attention + " " + b.kernel_id(*ws1::find_op_impl("linear_logp"), ws1::Direction::kForward),
                             o.strict, b.readback()};
  if (!o.json) {
    fmt::print("C6/C7 decode vs prefill (attention alone): heads {}/{}, head_dim {} from {}; probe head [{}, {}]; "
               "d = lhs - rhs, lhs prefill (teacher forcing), rhs direct decode\n",
               config->first.num_attention_heads, config->first.num_key_value_heads, config->first.head_dim,
               config->second, ws1::kProbeVocab, config->first.num_attention_heads * config->first.head_dim);
    fmt::print("{:<22} {:<6} {:<5} {:>4}  {:>17}  {:>17}  {:<8} {:>4}  {:>9} {:>9} {:>9}  {}\n", "case", "BxS", "pad",
               "rows", "decode==prefill", "max|err| (margin)", "KV read", "tok", "max|d|", "approx_kl0", "clipfrac0",
               "verdict rows/probe");
  }
  for (const ws1::KvCase& c : *cases) {
    auto in = ws1::kv_case_inputs(c, config->first, static_cast<std::uint64_t>(m.seed), o.threads);
    if (!in) return report(in.error());
    auto run = ws1::run_kv_case(*in, b, ctx);
    if (!run) return report(run.error());
    auto cells = ws1::kv_case_cells(ci, *in, *run);
    if (!cells) return report(cells.error());
    if (!o.json) print_kv_row(*in, (*cells)[0], (*cells)[1]);
    for (ws1::Cell& cell : *cells) s.evidence.cells.push_back(std::move(cell));
  }
  return finish_run(s.evidence, o.out, "parity-" + b.name(), o.json);
}

// ---- --logprobs ----------------------------------------------------------------------------------

int run_logprobs(const ParityOptions& o) {
  if (!o.chain_given.empty())
    return report(ws1::bad_input("--logprobs", o.logprobs, o.chain_given.front() + " runs a chain; --logprobs judges logprobs measured elsewhere"));
  auto contract = ws1::load_contract(o.contract.empty() ? default_contract() : o.contract);
  if (!contract) return report(contract.error());
  auto workload = WorkloadContext::load(o.workload.empty() ? default_workload() : o.workload, false);
  if (!workload) return report(workload.error());
  auto pairs = ws1::read_logprob_pairs(o.logprobs);
  if (!pairs) return report(pairs.error());
  auto cell = ws1::logprob_pairs_cell(*contract, *pairs, o.strict);
  if (!cell) return report(cell.error());

  ws1::Evidence e = ws1::begin_evidence(cli_argv());
  fill_gpu_environment(e.environment);
  e.environment.backend = std::string(ws1::kLogprobsBackend);
  e.contract = {contract->file, contract->version, contract->sha256};
  const ws1::Manifest& m = workload->manifest;
  e.workload = {m.file, m.workload_id, m.version, m.identity_sha256};
  if (!o.json) {
    const ws1::RolePair roles = contract->parity_roles();
    fmt::print("logprob parity: lhs {}, rhs {} (the contract's roles), d = lhs - rhs\n", roles.lhs, roles.rhs);
    fmt::print("logprobs {}: {} tokens{}, hash {}\n", pairs->source, pairs->lhs.size(),
               pairs->sequence.empty() ? "" : " with sequence ids", cell->fixture ? cell->fixture->hash : "-");
    print_metrics(*cell);
    fmt::print("approx_kl0 = mean(exp(d) - 1 - d): verl's k3 estimator (kl_penalty low_var_kl) with ref = lhs, "
               "logprob = rhs\n|d| histogram (tokens):");
    for (const ws1::MetricResult& mr : cell->metrics)
      if (mr.name.starts_with(kHistogram) && mr.value > 0)
        fmt::print(" {} {:.0f};", mr.name.substr(kHistogram.size()), mr.value);
    fmt::print("\n");
  }
  e.cells.push_back(std::move(cell).value());
  return finish_run(e, o.out, "parity-logprobs", o.json);
}

int run(const ParityOptions& o) {
  if (!o.logprobs.empty()) return run_logprobs(o);
  if (o.unpinned && (o.model.empty() || o.model.starts_with(kSyntheticPrefix)))
    return report(ws1::bad_input("--unpinned", o.model, "takes a snapshot directory (--model PATH)"));
  auto session = open_session({o.backend, o.contract, o.workload, o.threads, {}});
  if (!session) return report(session.error());
  Session& s = **session;
  if (o.fixture == "kv") return run_kv(o, s, s.run.op_context);
  auto ctx = op_context(o, s);
  if (!ctx) return report(ctx.error());
  ws1::ParityOptions popt;
  popt.strict = o.strict;
  popt.reference = !o.no_reference;
  popt.batched_decode = o.batched_decode;
  if (!o.rollout_rms_norm_order.empty()) {
    popt.rollout_rms_norm_order = ws1::rms_norm_order_from_name(o.rollout_rms_norm_order);
    if (!popt.rollout_rms_norm_order)
      return report(ws1::bad_input("--rollout-rms-norm-order", o.rollout_rms_norm_order, "expected kernel or hf"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto weights = open_model(o.model, s.workload.manifest, o.threads, o.unpinned);
  if (!weights) return report(weights.error());
  spdlog::info("weights {} ready in {:.2f} s", weights->label,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  auto fixture = open_fixture(o, s, *weights, *ctx);
  if (!fixture) {
    if (fixture.error().code != ws1::ExitCode::kRed) return report(fixture.error());
    spdlog::error("the candidate chain failed while sampling the sweep: {}", fixture.error().message());
    return exit_code(ws1::ExitCode::kRed);
  }
  spdlog::info("{} protocol: {} sequences, {} active tokens on {}", fixture->protocol, fixture->sequences.size(),
               fixture->active_tokens(), s.backend->name());
  auto parity = ws1::run_parity(*weights, *s.backend, *ctx, *fixture, popt);
  if (!parity) return report(parity.error());

  ws1::ParityCellInputs in{&s.contract, &*weights, &*fixture, &*parity,
                           {s.run.expected_backend, s.backend->name()}, chain_kernel_id(*s.backend)};
  auto cell = ws1::parity_cell(in);
  if (!cell) return report(cell.error());
  if (o.rms_norm_order != "contract") cell->id += "/rms_norm_order=" + o.rms_norm_order;
  if (!o.rollout_rms_norm_order.empty()) cell->id += "/rollout_rms_norm_order=" + o.rollout_rms_norm_order;
  const std::string name = "parity-" + s.backend->name();
  auto tensors = ws1::parity_token_tensors(in);
  if (!tensors) return report(tensors.error());
  const std::filesystem::path tokens_path = std::filesystem::path(o.out) / (name + ".tokens.safetensors");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ws1::Status st = ws1::write_safetensors(tokens_path, *tensors, ws1::parity_token_metadata(in)); !st)
    return report(st.error());
  if (!o.json) {
    print_table(*cell, *weights, *fixture, *parity, tokens_path.string());
    if (popt.rollout_rms_norm_order)
      fmt::print("rms_norm order: lhs {}, rhs {} (--rollout-rms-norm-order)\n",
                 ws1::contract_name(ctx->rms_norm_order), o.rollout_rms_norm_order);
  }
  s.evidence.cells.push_back(std::move(cell).value());
  return finish_run(s.evidence, o.out, name, o.json);
}

}  // namespace

Command register_parity(CLI::App& app) {
  auto o = std::make_shared<ParityOptions>();
  auto* sub = app.add_subcommand("parity", "chain-level teacher forcing vs rollout decode parity");
  CLI::Option* model = sub->add_option("--model", o->model, "synthetic:tiny | synthetic:qwen3-8b | PATH (Hugging Face snapshot)");
  CLI::Option* fixture = sub->add_option("--fixture", o->fixture,
                  "manifest (the gate: s0..s3) | sweep (spec §8.1) | kv (C6/C7 decode vs prefill attention cases)")->default_str("manifest");
  sub->add_option("--logprobs", o->logprobs,
                  "judge logprobs measured elsewhere instead of running a chain: FILE.safetensors (lhs, rhs "
                  "float32 [N]; optional sequence, position int64), FILE.jsonl ({\"lhs\": .., \"rhs\": ..} per "
                  "line) or LHS.npy,RHS.npy");
  const std::vector<CLI::Option*> sweep_only = {
      sub->add_option("--seeds", o->seeds, "sweep: prompt and sampling seeds")->delimiter(',')->default_str("1,2,3"),
      sub->add_option("--prompt-len", o->prompt_lens, "sweep: prompt lengths")->delimiter(',')->default_str("16"),
      sub->add_option("--response-len", o->response_lens, "sweep: response lengths")->delimiter(',')->default_str("32"),
      sub->add_option("--logit-scales", o->logit_scales, "sweep: lm_head multipliers (powers of two)")
          ->delimiter(',')->default_str("1"),
      sub->add_option("--sequences", o->sequences, "sweep: sequences per seed, length pair and logit scale")
          ->default_str("4"),
      sub->add_option("--temperature", o->temperature, "sweep: sampling temperature (0: greedy)")->default_str("1")};
  CLI::Option* order = sub->add_option("--rms-norm-order", o->rms_norm_order, "contract | kernel | hf")->default_str("contract");
  CLI::Option* rollout_order = sub->add_option("--rollout-rms-norm-order", o->rollout_rms_norm_order,
                "kernel | hf: rhs (rollout decode) in this RMSNorm order, lhs in --rms-norm-order's: two "
                "paths that are not bit-identical (spec 8.1's distribution)");
  sub->add_flag("--strict", o->strict, "also require d == 0 exactly; localise the first bitwise drift");
  CLI::Option* no_reference = sub->add_flag("--no-reference", o->no_reference,
                "skip the FP32 reference chain (CPU; slow at Qwen3-8B dims): no *_vs_fp32 metrics");
  CLI::Option* unpinned = sub->add_flag("--unpinned", o->unpinned,
                "--model PATH may be any Qwen3 dense snapshot (a fine-tuned policy): its shard SHA-256s and "
                "config are recorded and the run is labelled as not the WS1 chain gate");
  CLI::Option* batched = sub->add_flag("--batched-decode", o->batched_decode,
                "rhs decodes the sequences together (several lengths in flight, key_mask)");
  add_run_options(sub, o->backend, o->contract, o->workload, o->out, o->json, o->threads);
  std::vector<const CLI::Option*> chain_only = {model,   fixture,  order, rollout_order, no_reference,
                                                batched, unpinned, sub->get_option("--backend")};
  chain_only.insert(chain_only.end(), sweep_only.begin(), sweep_only.end());
  return {sub, [o, sweep_only, chain_only] {
            for (const CLI::Option* opt : sweep_only)
              if (opt->count() > 0) o->sweep_given.push_back(opt->get_name());
            for (const CLI::Option* opt : chain_only)
              if (opt->count() > 0) o->chain_given.push_back(opt->get_name());
            return run(*o);
          }};
}

}  // namespace ws1cli
