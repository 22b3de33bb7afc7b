// `ws1check bench --op OP|all`: the cuda_bf16 kernels timed on the device (median of many runs
// after warm-up, L2 flushed between runs, host copies excluded), next to two ceilings measured
// in the same run: device copy bandwidth and cuBLAS bf16 GEMM on the same shapes
// (docs/performance.md). Inputs are the workload's primary/normal fixtures (default: the
// 8192-token bench workload), generated but not judged. det_gemm gets more rows: the Qwen3-8B
// projection shapes (q/o, k/v, gate/up, down) at M = 8192 tokens, forward and backward, and at
// decode sizes M = 1, 8, 64, forward, on random normal bf16 inputs, each with cuBLAS on the
// same GEMM shapes in the same run. attention gets the rows its peers are timed on
// (kAttentionPeerShapes). `--peers FILE` (tools/bench/peers.py's ws1-peers-v1 file, measured in
// the same device call) adds each row's ratio to the peers timed on the same shapes
// (bench_peers.hpp).
#include <fmt/core.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench_peers.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "workload_context.hpp"
#include "ws1/evidence.hpp"
#include "ws1/fixture.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op.hpp"
#include "ws1/runner.hpp"
#include "ws1_build_config.h"
#if WS1_HAVE_CUDA
#include "ws1cuda/bench.hpp"
#include "ws1cuda/cuda_backend.hpp"
#endif

namespace ws1cli {
namespace {

struct BenchOptions {
  std::string op = "all";
  std::string direction = "both";
  std::string workload;
  std::string out;
  std::string contract;
  std::string peers;  // a ws1-peers-v1 file; empty: no peer ratios
  int reps = 50;
  int warmup = 5;
  bool no_flush = false;
};

#if WS1_HAVE_CUDA

struct Row {
  std::string op, variant, direction, region;  // variant: "" for the op's default kernels
  std::string peer_variant;  // the peers-file variant the row's shapes are ("" for none)
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double bytes = 0, flops = 0;
  double cublas_ms = -1;  // same GEMM shapes through cuBLAS; < 0: not GEMM-shaped
  double cublas_algorithm_ms = -1;  // the products the algorithm performs (OpWork::algorithm_gemms); < 0: none
};

double tensor_bytes(const ws1::Tensors& ts, bool seeds) {
  double b = 0;
  for (const auto& t : ts)
    if (seeds || t.name.rfind("dy.", 0) != 0) b += static_cast<double>(t.tensor.nbytes());
  return b;
}

// The primary/normal fixture of `op` (the one whose shapes the bench workload scales).
const ws1::FixtureSpec* bench_fixture(const WorkloadContext& w, std::string_view op) {
  for (const auto& s : w.catalogue)
    if (s.op == op && s.tier == ws1::Tier::kPrimary && s.distribution == ws1::Distribution::kNormal)
      return &s;
  return nullptr;
}

// One direction of one op variant: `run` timed inside a BenchScope, with the op's work and the
// cuBLAS time on the same GEMM shapes.
using RunFn = std::function<ws1::Result<ws1::Tensors>()>;
ws1::Result<Row> time_row(const ws1::Op& op, std::string variant, bool backward, const ws1::Tensors& in,
                          const RunFn& run, const ws1cuda::BenchSettings& settings) {
  std::vector<ws1cuda::RegionTiming> timings;
  ws1::Result<ws1::Tensors> out = ws1::Tensors{};
  {
    ws1cuda::BenchScope scope(settings);
    out = run();
    timings = scope.take();
  }
  if (!out) return out.error();
  Row r;
  r.op = std::string(op.name());
  r.variant = std::move(variant);
  r.peer_variant = r.variant;  // a named variant is its shapes; the default row's are shown apart
  r.direction = backward ? "bwd" : "fwd";
  for (const auto& t : timings) {
    r.region += (r.region.empty() ? "" : "+") + t.region;
    r.median_ms += t.median_ms();
    r.min_ms += t.min_ms();
    r.max_ms += t.max_ms();
  }
  const ws1::OpWork work = op.work(in, backward);
  r.bytes = work.bytes > 0 ? work.bytes : tensor_bytes(in, backward) + tensor_bytes(*out, true);
  r.flops = work.flops();
  const auto cublas_total = [&](const std::vector<ws1::GemmShape>& gemms) -> ws1::Result<double> {
    double ms = 0;
    for (const auto& g : gemms) {
      const ws1cuda::Ceiling c = ws1cuda::measure_cublas_bf16_gemm(static_cast<int>(g.m), static_cast<int>(g.n),
                                                                   static_cast<int>(g.k), settings);
      if (c.value < 0) return ws1::environment_error("cuBLAS", c.error);
      ms += c.median_ms;
    }
    return ms;
  };
  if (!work.gemms.empty()) {
    auto ms = cublas_total(work.gemms);
    if (!ms) return ms.error();
    r.cublas_ms = *ms;
  }
  if (!work.algorithm_gemms.empty()) {
    auto ms = cublas_total(work.algorithm_gemms);
    if (!ms) return ms.error();
    r.cublas_algorithm_ms = *ms;
  }
  if (timings.empty())
    spdlog::warn("{} {}: no timed launch region (kernels not wrapped in launch_region)", r.op, r.direction);
  return r;
}

// The backend's forward or backward of `op` on `in`, timed.
ws1::Result<Row> time_call(ws1::Backend& backend, const ws1::Op& op, const ws1::OpContext& ctx, std::string variant,
                           bool backward, const ws1::Tensors& in, const ws1cuda::BenchSettings& settings) {
  return time_row(op, std::move(variant), backward, in, [&] {
    return backward ? backend.backward(op, in, ctx) : backend.forward(op, in, ctx);
  }, settings);
}

// The directions a row is timed in: forward unless --direction bwd; backward where the row has
// one, unless --direction fwd.
std::vector<bool> directions(const BenchOptions& o, bool has_backward) {
  std::vector<bool> out;
  if (o.direction != "bwd") out.push_back(false);
  if (has_backward && o.direction != "fwd") out.push_back(true);
  return out;
}

// A [rows, cols] bf16 tensor of standard normal values (Box-Muller over a splitmix64 stream of
// `seed`): random data for the timing rows, never zeros.
ws1::Tensor random_normal_bf16(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  ws1::Tensor t(ws1::DType::kBF16, {rows, cols});
  auto* out = t.data<std::uint16_t>();
  const std::int64_t n = rows * cols;
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  const auto next = [&state] {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (std::int64_t i = 0; i < n; i += 2) {
    const std::uint64_t r = next();
    const double u1 = (static_cast<double>(r >> 40) + 1.0) / 16777217.0;  // (0, 1]
    const double u2 = static_cast<double>((r >> 16) & 0xFFFFFF) / 16777216.0;
    const double rad = std::sqrt(-2.0 * std::log(u1)), ang = 6.283185307179586 * u2;
    out[i] = ws1::to_bf16(static_cast<float>(rad * std::cos(ang))).bits;
    if (i + 1 < n) out[i + 1] = ws1::to_bf16(static_cast<float>(rad * std::sin(ang))).bits;
  }
  return t;
}

// The first `rows` rows of a row-major 2-D tensor.
ws1::Tensor first_rows(const ws1::Tensor& t, std::int64_t rows) {
  ws1::Tensor r(t.dtype(), {rows, t.shape()[1]});
  std::memcpy(r.data<std::uint16_t>(), t.data<std::uint16_t>(), r.nbytes());
  return r;
}

// det_gemm at the Qwen3-8B projection shapes (hidden 4096, 32 query / 8 key-value heads of 128,
// intermediate 12288): c[M, N] = a[M, K] · b[K, N] for (K, N) = q/o (4096, 4096), k/v (4096,
// 1024), gate/up (4096, 12288), down (12288, 4096); M = 8192 forward and backward, M = 64, 8, 1
// forward. The op runs with the run's context (its k_shards from the contract).
ws1::Result<std::vector<Row>> det_gemm_projection_rows(ws1::Backend& backend, const ws1::Op& op,
                                                       const ws1::OpContext& ctx, const BenchOptions& o,
                                                       const ws1cuda::BenchSettings& settings) {
  struct Projection {
    const char* name;
    std::int64_t k, n;
  };
  static constexpr Projection kProjections[] = {
      {"q/o", 4096, 4096}, {"k/v", 4096, 1024}, {"gate/up", 4096, 12288}, {"down", 12288, 4096}};
  constexpr std::int64_t kTokens = 8192;
  std::vector<Row> rows;
  std::uint64_t seed = 20261201;
  for (const Projection& p : kProjections) {
    const ws1::Tensor a = random_normal_bf16(kTokens, p.k, seed++);
    const ws1::Tensor b = random_normal_bf16(p.k, p.n, seed++);
    for (const std::int64_t m : {kTokens, std::int64_t{64}, std::int64_t{8}, std::int64_t{1}}) {
      ws1::Tensors in{{"a", m == kTokens ? a : first_rows(a, m)}, {"b", b}};
      for (const bool backward : directions(o, m == kTokens)) {
        if (backward) in.push_back({"dy.c", random_normal_bf16(m, p.n, seed++)});
        const std::string variant = fmt::format("{} M={}", p.name, m);
        spdlog::info("bench det_gemm {} {}", variant, backward ? "bwd" : "fwd");
        auto r = time_call(backend, op, ctx, variant, backward, in, settings);
        if (!r) return r.error();
        rows.push_back(*r);
      }
    }
  }
  return rows;
}

// attention at the shapes tools/bench/peers.py times its peers on (kAttentionPeerShapes: one
// causal sequence of 8192 and of 4096 tokens, forward and backward; decode, 32 sequences of one
// query against 4096 cached keys, forward), on random normal bf16 inputs [B, H, S, D] without a
// key_mask, each row named by its shapes (attention_peer_variant).
ws1::Result<std::vector<Row>> attention_peer_rows(ws1::Backend& backend, const ws1::Op& op, const ws1::OpContext& ctx,
                                                  const BenchOptions& o, const ws1cuda::BenchSettings& settings) {
  std::vector<Row> rows;
  std::uint64_t seed = 20261217;
  const auto normal = [&seed](std::int64_t b, std::int64_t h, std::int64_t s) {
    return random_normal_bf16(b * h * s, kPeerHeadDim, seed++).view({b, h, s, kPeerHeadDim});
  };
  for (const AttentionPeerShape& s : kAttentionPeerShapes) {
    ws1::Tensors in{{"q", normal(s.b, kPeerHq, s.sq)}, {"k", normal(s.b, kPeerHkv, s.skv)},
                    {"v", normal(s.b, kPeerHkv, s.skv)}};
    const std::string variant = attention_peer_variant(in);
    for (const bool backward : directions(o, s.backward)) {
      if (backward) in.push_back({"dy.o", normal(s.b, kPeerHq, s.sq)});
      spdlog::info("bench attention {} {}", variant, backward ? "bwd" : "fwd");
      auto r = time_call(backend, op, ctx, variant, backward, in, settings);
      if (!r) return r.error();
      rows.push_back(*r);
    }
  }
  return rows;
}

ws1::Result<std::vector<Row>> bench_op(ws1::Backend& backend, const ws1::Op& op, const WorkloadContext& w,
                                       ws1::FixtureGenerator& gen, const ws1::OpContext& ctx,
                                       const BenchOptions& o, const ws1cuda::BenchSettings& settings) {
  std::vector<Row> rows;
  const ws1::FixtureSpec* spec = bench_fixture(w, op.name());
  if (spec == nullptr) return rows;
  auto fx = gen.generate(*spec);
  if (!fx) return fx.error();
  const ws1::Tensors& in = fx->tensors;
  for (const bool backward : directions(o, !op.gradients().empty())) {
    auto r = time_call(backend, op, ctx, "", backward, in, settings);
    if (!r) return r.error();
    // The default row meets a peer only where its fixture's shapes are the peer's.
    if (op.name() == "attention") r->peer_variant = attention_peer_variant(in);
    rows.push_back(*r);
  }
  ws1::Result<std::vector<Row>> more = std::vector<Row>{};
  if (op.name() == "det_gemm") more = det_gemm_projection_rows(backend, op, ctx, o, settings);
  if (op.name() == "attention") more = attention_peer_rows(backend, op, ctx, o, settings);
  if (!more) return more.error();
  rows.insert(rows.end(), more->begin(), more->end());
  return rows;
}

// "<gpu>, torch <v>, cuDNN <v>": the peers file's environment in a few words.
std::string peers_environment_line(const PeersFile& p) {
  std::string s;
  for (const char* key : {"gpu", "torch", "cudnn"}) {
    const auto it = p.environment.find(key);
    if (it == p.environment.end()) continue;
    const std::string value = it->is_string() ? it->get<std::string>() : it->dump();
    s += (s.empty() ? "" : ", ") + (std::string_view(key) == "gpu" ? value : std::string(key) + " " + value);
  }
  return s;
}

int run_bench(const BenchOptions& o, const std::optional<PeersFile>& peers) {
  ws1::Evidence e = ws1::begin_evidence(cli_argv());
  if (!fill_gpu_environment(e.environment))
    return report(ws1::Error{"bench", "", "needs a CUDA device: " + e.environment.gpu_absent_reason,
                             ws1::ExitCode::kEnvironment});
  auto w = WorkloadContext::load(o.workload.empty() ? shipped_file("fixtures/ws1-bench-8k.json").string() : o.workload,
                                 false);
  if (!w) return report(w.error());
  std::vector<const ws1::Op*> ops;
  if (o.op == "all") {
    for (const ws1::Op* op : ws1::all_ops()) ops.push_back(op);
  } else if (const ws1::Op* op = ws1::find_op_impl(o.op)) {
    ops.push_back(op);
  } else {
    return report(ws1::bad_input("--op", o.op, "unknown op"));
  }
  auto backend = ws1cuda::make_cuda_bf16_backend();
  if (!backend) return report(backend.error());
  const ws1cuda::BenchSettings settings{o.warmup, o.reps, !o.no_flush};
  // Op settings as a judged run makes them (model config + the contract's declarations); the
  // bench judges nothing, so no fixture lock takes part.
  auto contract = ws1::load_contract(o.contract.empty() ? default_contract() : o.contract);
  if (!contract) return report(contract.error());
  const ws1::FixtureLock no_lock;
  const ws1::OpContext ctx =
      ws1::make_run_context(*contract, w->manifest, no_lock, "cuda_bf16", 0).op_context;

  const ws1cuda::Ceiling copy = ws1cuda::measure_copy_bandwidth(std::size_t{1} << 30, settings);
  if (copy.value < 0) return report(ws1::environment_error("copy bandwidth", copy.error));
  const ws1cuda::Ceiling peak = ws1cuda::measure_cublas_bf16_gemm(8192, 8192, 8192, settings);
  if (peak.value < 0) return report(ws1::environment_error("cuBLAS", peak.error));

  ws1::FixtureGenerator gen;
  std::vector<Row> rows;
  for (const ws1::Op* op : ops) {
    spdlog::info("bench {}", op->name());
    auto r = bench_op(**backend, *op, *w, gen, ctx, o, settings);
    if (!r) return report(r.error());
    rows.insert(rows.end(), r->begin(), r->end());
  }

  fmt::print("{} | copy {:.2f} TB/s (1 GiB D2D, read+write) | cuBLAS bf16 GEMM 8192^3 {:.0f} TFLOP/s | "
             "median of {} runs after {} warm-up{}\n",
             e.environment.gpu->name, copy.value, peak.value, o.reps, o.warmup,
             o.no_flush ? "" : ", L2 flushed");
  if (peers) {
    fmt::print("peers: {} ({}); x peer = the peer's median / ours\n", peers->path, peers_environment_line(*peers));
    // Ratios hold for one GPU: a file measured elsewhere is a mistake worth a word.
    const auto gpu = peers->environment.find("gpu");
    if (gpu != peers->environment.end() && gpu->is_string() && gpu->get<std::string>() != e.environment.gpu->name)
      spdlog::warn("peers {}: measured on {}, this run is on {}", peers->path, gpu->get<std::string>(),
                   e.environment.gpu->name);
  }
  constexpr int kLabel = 34;  // "attention (decode B=32 Skv=4096)" and a gap
  fmt::print("{:<{}}{:<5}{:>10}{:>10}{:>9}{:>8}{:>10}{:>8}{:>12}\n", "op", kLabel, "dir", "median ms", "GB", "TB/s",
             "%copy", "TFLOP/s", "%peak", "x cuBLAS");
  nlohmann::json j;
  j["schema"] = "ws1-bench-v1";
  j["tool"] = {{"version", e.tool.version}, {"source_commit", e.tool.source_commit},
               {"source_dirty", e.tool.source_dirty.value_or(true)}};
  j["gpu"] = {{"name", e.environment.gpu->name}, {"sm_count", e.environment.gpu->sm_count},
              {"driver", e.environment.gpu->driver_version}, {"runtime", e.environment.gpu->cuda_runtime_version},
              {"cublas", e.environment.gpu->cublas_version}};
  j["workload"] = w->manifest.file;
  j["settings"] = {{"reps", o.reps}, {"warmup", o.warmup}, {"flush_l2", !o.no_flush},
                   {"det_gemm_k_shards", ctx.k_shards}};
  j["ceilings"] = {{"copy_tbps", copy.value}, {"cublas_bf16_gemm_8192_tflops", peak.value}};
  j["rows"] = nlohmann::json::array();
  std::size_t peer_rows = 0;  // peer timings shown beside a row of ours
  for (const Row& r : rows) {
    const double s = r.median_ms * 1e-3;
    const double tbps = r.bytes / s / 1e12, tflops = r.flops / s / 1e12;
    const double ratio = r.cublas_ms > 0 ? r.cublas_ms / r.median_ms : 0.0;
    const std::string label = r.variant.empty() ? r.op : r.op + " (" + r.variant + ")";
    fmt::print("{:<{}}{:<5}{:>10.4f}{:>10.3f}{:>9.2f}{:>7.1f}%{:>10}{:>8}{:>12}\n", label, kLabel, r.direction,
               r.median_ms,
               r.bytes / 1e9, tbps, 100.0 * tbps / copy.value,
               r.flops > 0 ? fmt::format("{:.1f}", tflops) : "-",
               r.flops > 0 ? fmt::format("{:.1f}%", 100.0 * tflops / peak.value) : "-",
               r.cublas_ms > 0 ? fmt::format("{:.2f}", ratio) : "-");
    j["rows"].push_back({{"op", r.op}, {"variant", r.variant.empty() ? "default" : r.variant},
                         {"direction", r.direction}, {"regions", r.region},
                         {"median_ms", r.median_ms}, {"min_ms", r.min_ms}, {"max_ms", r.max_ms},
                         {"bytes", r.bytes}, {"flops", r.flops}, {"tbps", tbps},
                         {"pct_copy", 100.0 * tbps / copy.value},
                         {"tflops", r.flops > 0 ? tflops : 0.0},
                         {"cublas_same_shapes_ms", r.cublas_ms > 0 ? r.cublas_ms : 0.0},
                         {"ratio_to_cublas", ratio}});
    if (r.cublas_algorithm_ms > 0) {
      const double ra = r.cublas_algorithm_ms / r.median_ms;
      fmt::print("{:<{}}{:<5}  x cuBLAS on the products it computes (D30): {:.2f}\n", "", kLabel, "", ra);
      j["rows"].back()["cublas_algorithm_ms"] = r.cublas_algorithm_ms;
      j["rows"].back()["ratio_to_cublas_algorithm"] = ra;
    }
    if (peers) {
      const auto matched = compare_to_peers(*peers, r.op, r.peer_variant, r.direction, r.median_ms);
      for (const PeerRatio& p : matched) fmt::print("{:<{}}{:<5}  {}\n", "", kLabel, "", describe(p));
      if (!matched.empty()) {
        j["rows"].back()["peers"] = peers_json(matched);
        if (r.variant.empty()) j["rows"].back()["peer_variant"] = r.peer_variant;
      }
      peer_rows += matched.size();
    }
  }
  if (peers) {
    std::vector<TimedRow> timed;
    for (const Row& r : rows) timed.push_back({r.op, r.variant, r.peer_variant, r.direction, r.median_ms});
    const std::vector<CombinedRow> combined = combine_fwd_bwd(*peers, timed);
    if (!combined.empty()) fmt::print("fwd+bwd: our fwd and bwd medians added, against the peer's one fwd+bwd call\n");
    j["combined"] = nlohmann::json::array();
    for (const CombinedRow& c : combined) {
      fmt::print("{:<{}}{:<5}{:>10.4f}\n", c.variant.empty() ? c.op : c.op + " (" + c.variant + ")", kLabel, "f+b",
                 c.fwd_ms + c.bwd_ms);
      for (const PeerRatio& p : c.peers) fmt::print("{:<{}}{:<5}  {}\n", "", kLabel, "", describe(p));
      j["combined"].push_back(combined_json(c));
      peer_rows += c.peers.size();
    }
    j["peers_file"] = peers_file_json(*peers);
    if (peer_rows == 0) spdlog::warn("peers {}: no row matches a timed row (op, variant, direction)", peers->path);
  }
  if (!o.out.empty()) {
    if (auto made = ws1::make_out_dir(o.out); !made) return report(made.error());
    auto st = ws1::write_file_atomic(std::filesystem::path(o.out) / "bench-cuda_bf16.json", j.dump(2) + "\n");
    if (!st) return report(st.error());
  }
  return 0;
}

#endif

}  // namespace

Command register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* sub = app.add_subcommand("bench", "time the cuda_bf16 kernels against copy bandwidth and cuBLAS");
  sub->add_option("--op", o->op, "an op of the catalogue, or all")->default_str("all");
  sub->add_option("--direction", o->direction, "fwd | bwd | both")
      ->check(CLI::IsMember({"fwd", "bwd", "both"}))->default_str("both");
  sub->add_option("--workload", o->workload, "workload whose primary/normal fixtures are timed")
      ->default_str("fixtures/ws1-bench-8k.json");
  sub->add_option("--reps", o->reps, "timed runs per kernel region")->check(CLI::Range(1, 100000))->default_str("50");
  sub->add_option("--warmup", o->warmup, "untimed runs first")->check(CLI::Range(0, 1000))->default_str("5");
  sub->add_option("--contract", o->contract, "contract whose declarations set the op settings")
      ->default_str(default_contract());
  sub->add_flag("--no-flush", o->no_flush, "do not flush L2 between timed runs");
  sub->add_option("--out", o->out, "directory for bench-cuda_bf16.json");
  sub->add_option("--peers", o->peers,
                  "ws1-peers-v1 file from tools/bench/peers.py (same machine, same call): each row's ratio to its peers");
  return {sub, [o] {
            // Read before anything runs, so that a bad file is exit 2 on any build and machine.
            std::optional<PeersFile> peers;
            if (!o->peers.empty()) {
              auto p = read_peers_file(o->peers);
              if (!p) return report(p.error());
              peers = std::move(*p);
            }
#if WS1_HAVE_CUDA
            return run_bench(*o, peers);
#else
            (void)peers;
            return report(ws1::Error{"bench", "", "needs a build with CUDA (this one has none)",
                                     ws1::ExitCode::kEnvironment});
#endif
          }};
}

}  // namespace ws1cli
