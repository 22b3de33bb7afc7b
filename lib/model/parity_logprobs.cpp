// Logprobs measured elsewhere (a trainer's teacher forcing, an inference engine's rollout):
// the three file forms read into lhs / rhs pairs, and their chain_parity cell with the same
// metrics and verdict as a chain run's (parity_cell.cpp), plus a histogram of |d|.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

#include "json_node.hpp"
#include "parity_sides.hpp"
#include "ws1/fixture.hpp"
#include "ws1/judge.hpp"
#include "ws1/safetensors.hpp"

namespace ws1 {
namespace {

constexpr std::string_view kFormats = "expected FILE.safetensors, FILE.jsonl or LHS.npy,RHS.npy";

Status check_lengths(const LogprobPairs& p, const std::string& file) {
  const std::size_t n = p.lhs.size();
  if (p.rhs.size() != n)
    return bad_input(file, "rhs", fmt::format("{} values; lhs has {}", p.rhs.size(), n));
  if (!p.sequence.empty() && p.sequence.size() != n)
    return bad_input(file, "sequence", fmt::format("{} values; lhs has {}", p.sequence.size(), n));
  if (!p.position.empty() && p.position.size() != n)
    return bad_input(file, "position", fmt::format("{} values; lhs has {}", p.position.size(), n));
  return {};
}

// ---- safetensors: lhs, rhs F32 [N]; sequence, position I64 [N] optional ----

template <class T>
Result<std::vector<T>> vector_of(const SafetensorsFile& f, const std::string& file, std::string_view name, DType dtype,
                                 bool required) {
  const Tensor* t = f.find(name);
  if (t == nullptr) {
    if (required) return bad_input(file, std::string(name), "missing (the file holds lhs and rhs, float32 [N])");
    return std::vector<T>{};
  }
  if (t->dtype() != dtype || t->dim() != 1)
    return bad_input(file, std::string(name),
                     fmt::format("{} {}: expected {} [N]", dtype_safetensors_name(t->dtype()), shape_string(t->shape()),
                                 dtype_safetensors_name(dtype)));
  const Tensor c = t->contiguous();
  const T* v = c.data<T>();
  return std::vector<T>(v, v + c.numel());
}

Result<LogprobPairs> read_safetensors_pairs(const std::string& file) {
  auto f = read_safetensors(file);
  if (!f) return f.error();
  for (const NamedTensor& t : f->tensors)
    if (t.name != "lhs" && t.name != "rhs" && t.name != "sequence" && t.name != "position")
      return bad_input(file, t.name, "not a tensor of a logprob file (lhs, rhs; optional sequence, position)");
  LogprobPairs p;
  auto lhs = vector_of<float>(*f, file, "lhs", DType::kF32, true);
  if (!lhs) return lhs.error();
  auto rhs = vector_of<float>(*f, file, "rhs", DType::kF32, true);
  if (!rhs) return rhs.error();
  auto seq = vector_of<std::int64_t>(*f, file, "sequence", DType::kI64, false);
  if (!seq) return seq.error();
  auto pos = vector_of<std::int64_t>(*f, file, "position", DType::kI64, false);
  if (!pos) return pos.error();
  p.lhs = std::move(*lhs);
  p.rhs = std::move(*rhs);
  p.sequence = std::move(*seq);
  p.position = std::move(*pos);
  return p;
}

// ---- JSONL: {"lhs": x, "rhs": y[, "sequence": s][, "position": q]} per line ----

Result<LogprobPairs> read_jsonl_pairs(const std::string& file) {
  auto text = json::read_text_file(file);
  if (!text) return text.error();
  LogprobPairs p;
  std::optional<bool> has_sequence, has_position;  // fixed by the first record
  simdjson::dom::parser parser;
  std::size_t line_no = 0, begin = 0;
  try {
    while (begin < text->size()) {
      std::size_t end = text->find('\n', begin);
      if (end == std::string::npos) end = text->size();
      const std::string_view line(text->data() + begin, end - begin);
      begin = end + 1;
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      const std::string where = fmt::format("{}:{}", file, line_no);
      const json::Node r = json::parse_document(parser, line, where);
      r.allow_only({"lhs", "rhs", "sequence", "position"});
      p.lhs.push_back(static_cast<float>(r.at("lhs").number()));
      p.rhs.push_back(static_cast<float>(r.at("rhs").number()));
      const auto optional_int = [&](std::string_view key, std::optional<bool>& has, std::vector<std::int64_t>& out) {
        const std::optional<json::Node> v = r.find(key);
        if (!has) has = v.has_value();
        if (*has != v.has_value())
          r.fail(fmt::format("\"{}\" {} here but {} on the first record (on every line or on none)", key,
                             v ? "given" : "missing", *has ? "given" : "missing"));
        if (v) out.push_back(v->integer());
      };
      optional_int("sequence", has_sequence, p.sequence);
      optional_int("position", has_position, p.position);
    }
  } catch (const json::Failure& f) {
    return f.error;
  }
  return p;
}

// ---- .npy: version 1-3, '<f4', C order, shape (N,) ----

// The value text of `key` in the header's dict literal ('key': value, ...), up to the next
// top-level comma or the closing brace.
std::optional<std::string> npy_field(std::string_view header, std::string_view key) {
  const std::string quoted = fmt::format("'{}'", key);
  std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char ch = header[end];
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
  }
  std::string v(header.substr(at + 1, end - at - 1));
  const auto first = v.find_first_not_of(' '), last = v.find_last_not_of(' ');
  return first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
}

Result<std::vector<float>> read_npy_f32(const std::string& file) {
  auto bytes = json::read_text_file(file);
  if (!bytes) return bytes.error();
  const std::string_view b(*bytes);
  if (b.size() < 10 || b.substr(0, 6) != "\x93NUMPY")
    return bad_input(file, "magic", "not a .npy file (no \\x93NUMPY magic)");
  const unsigned major = static_cast<unsigned char>(b[6]);
  if (major < 1 || major > 3) return bad_input(file, "version", fmt::format("{}: expected 1, 2 or 3", major));
  const std::size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
  if (b.size() < start) return bad_input(file, "header", "truncated");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i)
    header_len |= static_cast<std::size_t>(static_cast<unsigned char>(b[8 + i])) << (8 * i);
  if (b.size() < start + header_len) return bad_input(file, "header", "truncated");
  const std::string_view header = b.substr(start, header_len);
  const auto descr = npy_field(header, "descr"), order = npy_field(header, "fortran_order"),
             shape = npy_field(header, "shape");
  if (!descr || (*descr != "'<f4'" && *descr != "'=f4'"))
    return bad_input(file, "descr", fmt::format("{}: expected '<f4' (little-endian float32)", descr.value_or("missing")));
  if (!order || *order != "False") return bad_input(file, "fortran_order", order.value_or("missing") + ": expected False");
  std::size_t n = 0;
  char tail[8] = {};
  if (!shape || std::sscanf(shape->c_str(), "(%zu%7[,)]", &n, tail) != 2 || (std::strcmp(tail, ",)") != 0 && std::strcmp(tail, ")") != 0))
    return bad_input(file, "shape", fmt::format("{}: expected a vector, (N,)", shape.value_or("missing")));
  const std::size_t data = start + header_len;
  if (b.size() - data != n * sizeof(float))
    return bad_input(file, "data", fmt::format("{} bytes after the header; shape ({},) of float32 needs {}", b.size() - data,
                                               n, n * sizeof(float)));
  std::vector<float> v(n);
  std::memcpy(v.data(), b.data() + data, n * sizeof(float));
  return v;
}

// "sequence 3 position 17", or "token 41" without positions.
std::string token_text(const LogprobPairs& p, std::int64_t i) {
  const auto k = static_cast<std::size_t>(i);
  std::string s = fmt::format("token {}", i);
  if (!p.sequence.empty()) s += fmt::format(" (sequence {}", p.sequence[k]);
  if (!p.position.empty()) s += fmt::format("{}position {}", p.sequence.empty() ? " (" : ", ", p.position[k]);
  if (!p.sequence.empty() || !p.position.empty()) s += ")";
  return s;
}

Tensor f32_tensor(const std::vector<float>& v) {
  Tensor t(DType::kF32, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor i64_tensor(const std::vector<std::int64_t>& v) {
  Tensor t(DType::kI64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

}  // namespace

Result<LogprobPairs> read_logprob_pairs(const std::string& spec) {
  Result<LogprobPairs> p = LogprobPairs{};
  if (const auto comma = spec.find(','); comma != std::string::npos) {
    const std::string l = spec.substr(0, comma), r = spec.substr(comma + 1);
    if (!l.ends_with(".npy") || !r.ends_with(".npy")) return bad_input("--logprobs", spec, std::string(kFormats));
    auto lhs = read_npy_f32(l);
    if (!lhs) return lhs.error();
    auto rhs = read_npy_f32(r);
    if (!rhs) return rhs.error();
    if (rhs->size() != lhs->size())
      return bad_input(r, "shape", fmt::format("({},): the lhs file {} has ({},)", rhs->size(), l, lhs->size()));
    p->lhs = std::move(*lhs);
    p->rhs = std::move(*rhs);
  } else if (spec.ends_with(".safetensors")) {
    p = read_safetensors_pairs(spec);
  } else if (spec.ends_with(".jsonl")) {
    p = read_jsonl_pairs(spec);
  } else {
    return bad_input("--logprobs", spec, std::string(kFormats));
  }
  if (!p) return p.error();
  if (Status st = check_lengths(*p, spec); !st) return st.error();
  p->source = spec;
  return p;
}

std::vector<NamedTensor> logprob_pair_tensors(const LogprobPairs& p) {
  std::vector<NamedTensor> t = {{"lhs", f32_tensor(p.lhs)}, {"rhs", f32_tensor(p.rhs)}};
  if (!p.sequence.empty()) t.push_back(NamedTensor{"sequence", i64_tensor(p.sequence)});
  if (!p.position.empty()) t.push_back(NamedTensor{"position", i64_tensor(p.position)});
  return t;
}

std::vector<std::pair<std::string, std::int64_t>> abs_dlogp_histogram(std::span<const float> lhs,
                                                                       std::span<const float> rhs) {
  // d == 0; then (0, 1e-8], (1e-8, 1e-7], ..., (1e-1, 1]; then (1, inf); then NaN or infinite.
  static constexpr double kEdges[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  static constexpr const char* kNames[] = {"(0,1e-08]",     "(1e-08,1e-07]", "(1e-07,1e-06]", "(1e-06,1e-05]",
                                           "(1e-05,1e-04]", "(1e-04,1e-03]", "(1e-03,1e-02]", "(1e-02,1e-01]",
                                           "(1e-01,1]"};
  std::vector<std::pair<std::string, std::int64_t>> bins = {{"0", 0}};
  for (const char* n : kNames) bins.emplace_back(n, 0);
  bins.emplace_back("(1,inf)", 0);
  bins.emplace_back("nan/inf", 0);
  for (std::size_t i = 0; i < lhs.size(); ++i) {
    const double d = std::fabs(lhs[i] - rhs[i]);  // d in float32, as dlogp_stats
    std::size_t b = bins.size() - 2;               // (1, inf) unless an edge holds it
    if (!std::isfinite(d)) {
      b = bins.size() - 1;
    } else if (d == 0) {
      b = 0;
    } else {
      for (std::size_t e = 0; e < std::size(kEdges); ++e)
        if (d <= kEdges[e]) {
          b = 1 + e;
          break;
        }
    }
    ++bins[b].second;
  }
  return bins;
}

Result<Cell> logprob_pairs_cell(const Contract& c, const LogprobPairs& p, bool strict) {
  if (Status st = model_detail::check_compute_dtype(c); !st) return st.error();
  const RolePair roles = c.parity_roles();
  const std::vector<NamedTensor> tensors = logprob_pair_tensors(p);
  Cell cell;
  cell.id = "chain/chain_parity/logprobs/" + p.source;
  cell.op = "logprobs";
  cell.op_class = "chain";
  cell.judgment = Judgment::kChainParity;
  cell.tier = "logprobs";
  cell.transform = fmt::format("{}_vs_{}", roles.lhs, roles.rhs);
  cell.backend = {std::string(kLogprobsBackend), std::string(kLogprobsBackend)};
  cell.kernel_id = "logprobs measured elsewhere: " + p.source;
  FixtureRef f;
  f.id = "chain/logprobs/" + p.source;
  f.hash = fixture_hash(f.id, 0, tensors);
  for (const NamedTensor& t : tensors) f.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  cell.fixture = std::move(f);
  cell.dtypes = {DType::kF32, DType::kF32};
  cell.threshold = CellThreshold{ThresholdMode::kMetric, std::nullopt, std::nullopt, "chain_logprob_aggregates"};
  if (p.lhs.empty()) {
    cell.verdict = Verdict::kRed;
    cell.reason = "empty active token set (chain_logprob_aggregates.empty_active_token_set: " +
                  c.chain.empty_active_token_set + ")";
    return cell;
  }
  const DlogpStats s = dlogp_stats(p.lhs, p.rhs, c.clip_interval());
  if (Status st = model_detail::add_dlogp_metrics(c, s, cell); !st) return st.error();
  for (const auto& [bin, count] : abs_dlogp_histogram(p.lhs, p.rhs))
    cell.metrics.push_back({"abs_dlogp_tokens" + bin, static_cast<double>(count), std::nullopt, ""});
  std::vector<std::string> red =
      model_detail::dlogp_red_reasons(c, s, cell, [&](std::int64_t i) { return token_text(p, i); });
  if (strict) {
    cell.bitwise.push_back(judge_bitwise(fmt::format("logp {} vs {}", roles.lhs, roles.rhs), tensors[0].tensor,
                                         tensors[1].tensor, NanPolicy::kFail));
    if (!passed(cell.bitwise.back()))
      red.push_back(fmt::format("strict: d is not exactly 0 at {} of {} tokens", cell.bitwise.back().mismatches,
                                p.lhs.size()));
  }
  for (const auto& r : red) cell.reason += (cell.reason.empty() ? "" : "; ") + r;
  cell.verdict = red.empty() ? Verdict::kGreen : Verdict::kRed;
  return cell;
}

}  // namespace ws1
