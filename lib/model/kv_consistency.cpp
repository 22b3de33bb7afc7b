// The two paths of a C6/C7 decode-vs-prefill case (ws1/kv_consistency.hpp): one prefill call,
// one decode call per position against a KvCache, and the logprob probe on each path's rows.
#include "ws1/kv_consistency.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ws1/model.hpp"

namespace ws1 {

// ---- the two paths ------------------------------------------------------------------------------

namespace {

// One op call on the backend, its output checked as the chain checks it (declared dtype, shape).
// Anything the candidate does wrong is an Error with code kRed (a red cell, not exit 2).
Result<Tensor> call(Backend& backend, const OpContext& ctx, std::string_view op_name, const Tensors& in,
                    const Shape& shape, const std::string& where) {
  const Op* op = find_op_impl(op_name);
  if (op == nullptr) return environment_error(std::string(op_name), "no implementation of the op in this build");
  const TensorDecl decl = op->outputs().front();
  auto r = backend.forward(*op, in, ctx);
  const std::string at = fmt::format("{} ({})", where, op_name);
  if (!r) return Error{backend.name(), at, r.error().message(), ExitCode::kRed};
  const Tensor* out = find_tensor(*r, decl.name);
  if (out == nullptr) return Error{backend.name(), at, "no output '" + decl.name + "'", ExitCode::kRed};
  if (out->dtype() != decl.candidate_dtype)
    return Error{backend.name(), at,
                 fmt::format("output {} is {} (declared {})", decl.name, dtype_contract_name(out->dtype()),
                             dtype_contract_name(decl.candidate_dtype)),
                 ExitCode::kRed};
  if (out->shape() != shape)
    return Error{backend.name(), at,
                 fmt::format("output {} has shape {} (expected {})", decl.name, shape_string(out->shape()),
                             shape_string(shape)),
                 ExitCode::kRed};
  return out->contiguous();
}

// `count` bf16 elements from src to dst.
void copy_bf16(const Tensor& src, std::int64_t src_at, Tensor& dst, std::int64_t dst_at, std::int64_t count) {
  std::memcpy(dst.data<std::uint16_t>() + dst_at, src.data<std::uint16_t>() + src_at,
              static_cast<std::size_t>(count) * sizeof(std::uint16_t));
}

std::int64_t offset_of(const KvCase& c, std::int64_t len) {
  return c.padding == KvPadding::kLeft ? c.padded_len - len : 0;
}

// Prefill: the batch laid out [B, H, S, D] (zero pads), key_mask false on the pads when a
// sequence is shorter than S; returns the valid query rows [N, Hq, D].
Result<Tensor> prefill(const KvCaseInputs& in, Backend& backend, const OpContext& ctx) {
  const KvCase& c = in.kv_case;
  const auto b = static_cast<std::int64_t>(in.sequences.size());
  const std::int64_t s = c.padded_len, d = in.d;
  Tensor q(DType::kBF16, {b, in.hq, s, d}), k(DType::kBF16, {b, in.hkv, s, d}), v(DType::kBF16, {b, in.hkv, s, d});
  Tensor mask(DType::kBool, {b, s});
  bool padded = false;
  for (std::int64_t i = 0; i < b; ++i) {
    const KvSequence& seq = in.sequences[static_cast<std::size_t>(i)];
    const std::int64_t len = seq.q.shape()[0], off = offset_of(c, len);
    padded = padded || len < s;
    for (std::int64_t t = 0; t < len; ++t) {
      mask.data<std::uint8_t>()[i * s + off + t] = 1;
      for (std::int64_t h = 0; h < in.hq; ++h) copy_bf16(seq.q, (t * in.hq + h) * d, q, ((i * in.hq + h) * s + off + t) * d, d);
      for (std::int64_t h = 0; h < in.hkv; ++h) {
        copy_bf16(seq.k, (t * in.hkv + h) * d, k, ((i * in.hkv + h) * s + off + t) * d, d);
        copy_bf16(seq.v, (t * in.hkv + h) * d, v, ((i * in.hkv + h) * s + off + t) * d, d);
      }
    }
  }
  Tensors args{{"q", q}, {"k", k}, {"v", v}};
  if (padded) args.push_back({"key_mask", mask});
  auto o = call(backend, ctx, "attention", args, q.shape(), fmt::format("prefill [{}, {}]", b, s));
  if (!o) return o.error();
  Tensor rows(DType::kBF16, {in.rows(), in.hq, d});
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int64_t len = in.sequences[static_cast<std::size_t>(i)].q.shape()[0], off = offset_of(c, len);
    for (std::int64_t t = 0; t < len; ++t, ++n)
      for (std::int64_t h = 0; h < in.hq; ++h) copy_bf16(*o, ((i * in.hq + h) * s + off + t) * d, rows, (n * in.hq + h) * d, d);
  }
  return rows;
}

// Rows [n, Hkv, D] of a [1, Hkv, L, D] cache read, token-major again.
void token_major(const Tensor& cache_read, Tensor& dst, std::int64_t first_row) {
  const std::int64_t hkv = cache_read.shape()[1], len = cache_read.shape()[2], d = cache_read.shape()[3];
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t h = 0; h < hkv; ++h) copy_bf16(cache_read, (h * len + t) * d, dst, ((first_row + t) * hkv + h) * d, d);
}

Tensor i64_vector(std::span<const std::int64_t> v) {
  Tensor t(DType::kI64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

}  // namespace

Result<KvCaseRun> run_kv_case(const KvCaseInputs& in, Backend& backend, const OpContext& ctx) {
  KvCaseRun run;
  run.probe_fixture.protocol = "kv_consistency/" + in.kv_case.name;
  run.probe_fixture.seed = in.seed;
  for (const KvSequence& s : in.sequences) run.probe_fixture.sequences.push_back({s.id, s.tokens, s.prompt_len, 1.0});
  const std::int64_t n = in.rows(), hq = in.hq, hkv = in.hkv, d = in.d, width = hq * d;
  run.decode = Tensor(DType::kBF16, {n, hq, d});
  for (Tensor* t : {&run.written_k, &run.written_v, &run.read_k, &run.read_v}) *t = Tensor(DType::kBF16, {n, hkv, d});

  // A candidate failure ends the case: the cells say which call failed.
  const auto fail = [&](const Error& e) -> Result<KvCaseRun> {
    if (e.code != ExitCode::kRed) return e;
    run.candidate_failure = e;
    return std::move(run);
  };
  auto pre = prefill(in, backend, ctx);
  if (!pre) return fail(pre.error());
  run.prefill = std::move(pre).value();

  std::vector<float> decode_logp;
  std::vector<std::int64_t> scored_rows, targets;  // rows of the prefill probe call
  std::int64_t first = 0;
  for (std::size_t si = 0; si < in.sequences.size(); ++si) {
    const KvSequence& s = in.sequences[si];
    const std::int64_t len = s.q.shape()[0];
    KvCache cache(1, hkv, d);
    for (std::int64_t t = 0; t < len; ++t) {
      cache.append(0, s.k.slice(0, t, t + 1), s.v.slice(0, t, t + 1));
      cache.commit(1);
      const Tensors args{{"q", s.q.slice(0, t, t + 1).contiguous().view({1, hq, 1, d})},
                         {"k", cache.keys(0, t + 1)},
                         {"v", cache.values(0, t + 1)}};
      const std::string where = fmt::format("decode {} position {}", s.id, t);
      auto o = call(backend, ctx, "attention", args, {1, hq, 1, d}, where);
      if (!o) return fail(o.error());
      copy_bf16(*o, 0, run.decode, (first + t) * width, width);
      if (t < s.prompt_len - 1 || t + 1 >= len) continue;
      // The decode path's probe: this step's row alone, scoring the next token.
      auto target = i64_vector(std::span(s.tokens).subspan(static_cast<std::size_t>(t + 1), 1));
      auto logp = call(backend, ctx, "linear_logp",
                       {{"hidden", o->view({1, width})}, {"weight", in.probe_head}, {"targets", target}}, {1}, where);
      if (!logp) return fail(logp.error());
      decode_logp.push_back(logp->data<float>()[0]);
      scored_rows.push_back(first + t);
      targets.push_back(s.tokens[static_cast<std::size_t>(t + 1)]);
      run.probe.tokens.push_back({static_cast<std::int64_t>(si), t + 1, targets.back(), 0, 0,
                                  std::numeric_limits<float>::quiet_NaN()});
    }
    // C7: what the cache hands back must be the bits written into it.
    token_major(cache.keys(0, len), run.read_k, first);
    token_major(cache.values(0, len), run.read_v, first);
    copy_bf16(s.k, 0, run.written_k, first * hkv * d, len * hkv * d);
    copy_bf16(s.v, 0, run.written_v, first * hkv * d, len * hkv * d);
    first += len;
  }
  // The prefill path's probe: every scored row of the prefill output in one call.
  const auto scored = static_cast<std::int64_t>(scored_rows.size());
  Tensor hidden(DType::kBF16, {scored, width});
  for (std::int64_t r = 0; r < scored; ++r) copy_bf16(run.prefill, scored_rows[static_cast<std::size_t>(r)] * width, hidden, r * width, width);
  auto target = i64_vector(targets);
  auto logp = call(backend, ctx, "linear_logp", {{"hidden", hidden}, {"weight", in.probe_head}, {"targets", target}},
                   {scored}, "prefill probe");
  if (!logp) return fail(logp.error());
  for (std::int64_t r = 0; r < scored; ++r) {
    TokenLogp& tok = run.probe.tokens[static_cast<std::size_t>(r)];
    tok.teacher_forcing = logp->data<float>()[r];
    tok.rollout_decode = decode_logp[static_cast<std::size_t>(r)];
  }
  return run;
}

}  // namespace ws1
