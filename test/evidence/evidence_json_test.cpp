// The artifact written to disk and read back through simdjson's DOM parser.
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "evidence_test_support.hpp"

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;
using ws1::test::read_float;

std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

std::string_view str(element e) {
  std::string_view s;
  REQUIRE(e.get_string().get(s) == simdjson::SUCCESS);
  return s;
}
std::int64_t i64(element e) {
  std::int64_t v = 0;
  REQUIRE(e.get_int64().get(v) == simdjson::SUCCESS);
  return v;
}
bool boolean(element e) {
  bool v = false;
  REQUIRE(e.get_bool().get(v) == simdjson::SUCCESS);
  return v;
}
element at(element e, std::string_view key) {
  element v;
  INFO("key " << key);
  REQUIRE(e.at_key(key).get(v) == simdjson::SUCCESS);
  return v;
}
element at(element e, std::size_t i) {
  element v;
  REQUIRE(e.at(i).get(v) == simdjson::SUCCESS);
  return v;
}
std::size_t size(element e) {
  array a;
  REQUIRE(e.get_array().get(a) == simdjson::SUCCESS);
  return a.size();
}
std::vector<std::string> keys(element e) {
  object o;
  REQUIRE(e.get_object().get(o) == simdjson::SUCCESS);
  std::vector<std::string> k;
  for (auto field : o) k.emplace_back(field.key);
  return k;
}
ws1::Dims dims(element e) {
  ws1::Dims d;
  for (std::size_t i = 0; i < size(e); ++i) d.push_back(i64(at(e, i)));
  return d;
}
// A float field read back is the same double, bit for bit (NaN: any NaN, as the string "nan").
void same_double(element e, double expected) {
  INFO("expected " << expected);
  if (std::isnan(expected)) {
    CHECK(str(e) == "nan");
    return;
  }
  if (std::isinf(expected)) {
    CHECK(str(e) == (expected > 0 ? "inf" : "-inf"));
    return;
  }
  CHECK(bits(read_float(e)) == bits(expected));
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("evidence: full artifact round-trips through simdjson", "[evidence]") {
  ws1::test::TempDir tmp;
  const ws1::Evidence e = ws1::test::sample_evidence();
  auto written = ws1::write_evidence(e, tmp.path() / "out", "gate");
  REQUIRE(written.ok());
  CHECK(*written == tmp.path() / "out" / "gate.json");
  CHECK(ws1::test::dir_entries(tmp.path() / "out") == std::vector<std::string>{"gate.json"});

  simdjson::dom::parser parser;
  element doc;
  REQUIRE(parser.load(written->string()).get(doc) == simdjson::SUCCESS);

  // Top level, in schema order.
  CHECK(keys(doc) == std::vector<std::string>{"schema_version", "tool", "checkout", "command",
                                              "started", "finished", "contract", "workload",
                                              "environment", "cells", "summary", "verdict"});
  CHECK(str(at(doc, "schema_version")) == "ws1check-evidence-v6");
  element tool = at(doc, "tool");
  CHECK(str(at(tool, "name")) == "ws1check");
  CHECK(str(at(tool, "version")) == e.tool.version);
  CHECK(str(at(tool, "source_commit")) == e.tool.source_commit);
  if (e.tool.source_dirty)
    CHECK(boolean(at(tool, "source_dirty")) == *e.tool.source_dirty);
  else
    CHECK(at(tool, "source_dirty").is_null());
  CHECK(str(at(at(doc, "checkout"), "commit")) == std::string(40, 'a'));
  CHECK(boolean(at(at(doc, "checkout"), "dirty")));
  REQUIRE(size(at(doc, "command")) == e.command.size());
  for (std::size_t i = 0; i < e.command.size(); ++i) CHECK(str(at(at(doc, "command"), i)) == e.command[i]);
  CHECK(str(at(doc, "started")) == e.started);
  CHECK(str(at(doc, "finished")) == e.finished);
  CHECK(str(at(at(doc, "contract"), "path")) == e.contract.path);
  CHECK(str(at(at(doc, "contract"), "version")) == "ws1-c1-v2");
  CHECK(str(at(at(doc, "contract"), "sha256")) == e.contract.sha256);
  CHECK(str(at(at(doc, "workload"), "path")) == e.workload.path);
  CHECK(str(at(at(doc, "workload"), "workload_id")) == e.workload.workload_id);
  CHECK(str(at(at(doc, "workload"), "manifest_version")) == "ws1-c2-v8");
  CHECK(str(at(at(doc, "workload"), "identity_sha256")) == e.workload.identity_sha256);

  // Environment.
  element env = at(doc, "environment");
  element host = at(env, "host");
  CHECK(str(at(host, "hostname")) == e.environment.host.hostname);
  CHECK(str(at(host, "os")) == e.environment.host.os);
  CHECK(str(at(host, "kernel")) == e.environment.host.kernel);
  CHECK(str(at(host, "arch")) == e.environment.host.arch);
  CHECK(str(at(host, "cpu_model")) == e.environment.host.cpu_model);
  CHECK(i64(at(host, "logical_cores")) == e.environment.host.logical_cores);
  CHECK(i64(at(host, "memory_total_bytes")) == e.environment.host.memory_total_bytes);
  CHECK(str(at(at(env, "build"), "compiler")) == e.environment.compiler);
  CHECK(str(at(at(env, "build"), "build_type")) == e.environment.build_type);
  CHECK(boolean(at(at(env, "build"), "cuda")) == e.environment.built_with_cuda);
  CHECK(str(at(env, "backend")) == "cuda_bf16");
  element gpu = at(env, "gpu");
  CHECK(str(at(gpu, "name")) == "NVIDIA H200");
  CHECK(str(at(gpu, "compute_capability")) == "9.0");
  CHECK(i64(at(gpu, "sm_count")) == 132);
  CHECK(i64(at(gpu, "memory_bytes")) == 150'000'000'000LL);
  CHECK(i64(at(gpu, "l2_cache_bytes")) == 62'914'560);
  CHECK(str(at(gpu, "driver_version")) == "13.0");
  CHECK(str(at(gpu, "cuda_runtime_version")) == "13.0");
  CHECK(str(at(gpu, "cublas_version")) == "13.1.0");
  CHECK(str(at(gpu, "cublas_math_mode")) == "CUBLAS_PEDANTIC_MATH");
  CHECK_FALSE(boolean(at(gpu, "tf32_enabled")));
  CHECK(at(env, "gpu_absent_reason").is_null());
  CHECK(str(at(env, "autocast")) == "not applicable to this runtime");
  CHECK(str(at(env, "captured_at")) == e.environment.captured_at);

  // Cells.
  element cells = at(doc, "cells");
  REQUIRE(size(cells) == 4);
  element green = at(cells, 0), red = at(cells, 1), na = at(cells, 2), chain = at(cells, 3);
  CHECK(keys(green) == std::vector<std::string>{
                           "id", "op", "op_class", "judgment", "direction", "tier", "transform",
                           "backend", "kernel_id", "fixture", "dtypes", "readback", "reference", "threshold",
                           "verdict", "reason", "tensors", "metrics", "timing"});
  CHECK(str(at(green, "id")) == e.cells[0].id);
  {  // the stages in run order, their seconds exact; a cell without timings writes []
    element timing = at(green, "timing");
    REQUIRE(size(timing) == 4);
    CHECK(str(at(at(timing, 0), "stage")) == "fixture");
    CHECK(str(at(at(timing, 3), "stage")) == "judge");
    CHECK(double(at(at(timing, 1), "seconds")) == 1.5);
    CHECK(size(at(na, "timing")) == 0);
  }
  CHECK(str(at(green, "op")) == "rms_norm");
  CHECK(str(at(green, "op_class")) == "reduction");
  CHECK(str(at(green, "judgment")) == "forward_accuracy");
  CHECK(str(at(green, "direction")) == "fwd");
  CHECK(str(at(green, "tier")) == "short");
  CHECK(str(at(green, "transform")) == "none");
  CHECK(str(at(at(green, "backend"), "expected")) == "cuda_bf16");
  CHECK(str(at(at(green, "backend"), "actual")) == "cuda_bf16");
  CHECK(str(at(green, "kernel_id")) == "ws1cuda.rms_norm.fwd.v1");
  element fx = at(green, "fixture");
  CHECK(str(at(fx, "id")) == "rms_norm-short");
  CHECK(str(at(fx, "hash")) == "99aa06d3014798d86001c324468d497f");
  std::uint64_t seed = 0;
  REQUIRE(at(fx, "seed").get_uint64().get(seed) == simdjson::SUCCESS);
  CHECK(seed == 18446744073709551615ULL);
  REQUIRE(size(at(fx, "tensors")) == 2);
  CHECK(str(at(at(at(fx, "tensors"), 0), "name")) == "x");
  CHECK(str(at(at(at(fx, "tensors"), 0), "dtype")) == "bfloat16");
  CHECK(dims(at(at(at(fx, "tensors"), 0), "shape")) == ws1::Dims{4, 27, 4096});
  CHECK(dims(at(at(at(fx, "tensors"), 1), "shape")) == ws1::Dims{4096});
  CHECK(str(at(at(green, "dtypes"), "candidate")) == "bfloat16");
  CHECK(str(at(at(green, "dtypes"), "reference")) == "float32");
  CHECK_FALSE(boolean(at(at(green, "readback"), "tf32")));
  CHECK(str(at(at(green, "readback"), "cublas_math_mode")) == "CUBLAS_PEDANTIC_MATH");
  CHECK(str(at(at(green, "readback"), "autocast")) == "not applicable to this runtime");
  element th = at(green, "threshold");
  CHECK(str(at(th, "mode")) == "tolerance");
  same_double(at(th, "atol"), *e.cells[0].threshold->atol);
  same_double(at(th, "rtol"), *e.cells[0].threshold->rtol);
  CHECK(str(at(th, "source")) == "judgments.forward_accuracy.by_op_class.reduction.bfloat16");
  CHECK(str(at(green, "verdict")) == "green");
  CHECK(at(green, "reason").is_null());
  CHECK(size(at(green, "metrics")) == 0);

  REQUIRE(size(at(green, "tensors")) == 1);
  element acc = at(at(green, "tensors"), 0);
  const ws1::AccuracyTensor& a = e.cells[0].accuracy[0];
  CHECK(str(at(acc, "comparison")) == "accuracy");
  CHECK(str(at(acc, "name")) == "y");
  CHECK(dims(at(acc, "shape")) == a.shape);
  CHECK(str(at(acc, "dtype")) == "bfloat16");
  CHECK(i64(at(acc, "numel")) == a.numel);
  CHECK(i64(at(acc, "violations")) == 0);
  for (auto [key, st] : {std::pair{"abs_error", a.abs_error}, std::pair{"rel_error", a.rel_error},
                         std::pair{"ulp_distance", a.ulp_distance}}) {
    INFO(key);
    element s = at(acc, key);
    same_double(at(s, "max"), st.max);
    same_double(at(s, "mean"), st.mean);
    same_double(at(s, "p99"), st.p99);
    same_double(at(s, "p999"), st.p999);
  }
  element worst = at(acc, "worst");
  CHECK(dims(at(worst, "index")) == ws1::Dims{3, 26, 4095});
  same_double(at(worst, "candidate"), a.worst->candidate);
  same_double(at(worst, "reference"), a.worst->reference);
  same_double(at(worst, "allowed"), a.worst->allowed);
  same_double(at(worst, "margin"), a.worst->margin);
  CHECK(boolean(at(worst, "violates")) == a.worst->violates);
  // -0.0 keeps its sign.
  CHECK(std::signbit(read_float(at(at(acc, "abs_error"), "p999"))));

  // The red bitwise cell: hex of the dtype's width, explicit non-finite strings.
  CHECK(str(at(red, "judgment")) == "gradient_invariance");
  CHECK(str(at(red, "direction")) == "bwd");
  CHECK(str(at(red, "verdict")) == "red");
  CHECK(str(at(red, "reason")) == e.cells[1].reason);
  CHECK(str(at(at(red, "threshold"), "mode")) == "bitwise");
  CHECK(str(at(at(red, "dtypes"), "reference")) == "bfloat16");
  CHECK(str(at(at(at(at(red, "fixture"), "tensors"), 1), "dtype")) == "int64");
  REQUIRE(size(at(red, "tensors")) == 2);
  element bw = at(at(red, "tensors"), 0);
  CHECK(str(at(bw, "comparison")) == "bitwise");
  CHECK(str(at(bw, "name")) == "dA");
  CHECK(dims(at(bw, "lhs_shape")) == ws1::Dims{27, 4096});
  CHECK(dims(at(bw, "rhs_shape")) == ws1::Dims{27, 4096});
  CHECK(str(at(bw, "lhs_dtype")) == "bfloat16");
  CHECK(str(at(bw, "rhs_dtype")) == "bfloat16");
  CHECK(boolean(at(bw, "shapes_equal")));
  CHECK(boolean(at(bw, "dtypes_equal")));
  CHECK_FALSE(boolean(at(bw, "equal_bits")));
  CHECK(i64(at(bw, "mismatches")) == 2);
  REQUIRE(size(at(bw, "first_mismatches")) == 2);
  element m0 = at(at(bw, "first_mismatches"), 0), m1 = at(at(bw, "first_mismatches"), 1);
  CHECK(dims(at(m0, "index")) == ws1::Dims{0, 7});
  CHECK(str(at(m0, "lhs_bits")) == "0x0000");
  CHECK(str(at(m0, "rhs_bits")) == "0x8000");
  same_double(at(m0, "lhs"), 0.0);
  same_double(at(m0, "rhs"), -0.0);
  CHECK(str(at(m1, "lhs_bits")) == "0x7fc1");
  CHECK(str(at(m1, "lhs")) == "nan");
  CHECK(str(at(m1, "rhs")) == "inf");
  CHECK(i64(at(bw, "lhs_nans")) == 1);
  CHECK(i64(at(bw, "rhs_nans")) == 0);
  CHECK(i64(at(bw, "signed_zero_mismatches")) == 1);
  REQUIRE(size(at(bw, "notes")) == 1);
  CHECK(str(at(at(bw, "notes"), 0)) == e.cells[1].bitwise[0].notes[0]);
  element bw32 = at(at(red, "tensors"), 1);
  element m32 = at(at(bw32, "first_mismatches"), 1);
  CHECK(str(at(at(at(bw32, "first_mismatches"), 0), "rhs_bits")) == "0xbf800000");
  CHECK(str(at(m32, "lhs_bits")) == "0xff800000");
  CHECK(str(at(m32, "rhs_bits")) == "0x00000001");
  CHECK(str(at(m32, "lhs")) == "-inf");
  same_double(at(m32, "rhs"), 1.4e-45);

  // N/A: nulls are explicit, the reason is there.
  CHECK(str(at(na, "verdict")) == "na");
  CHECK(str(at(na, "reason")) == e.cells[2].reason);
  CHECK(at(na, "fixture").is_null());
  CHECK(at(na, "threshold").is_null());
  CHECK(at(at(na, "readback"), "tf32").is_null());
  CHECK(at(at(na, "readback"), "cublas_math_mode").is_null());
  CHECK(size(at(na, "tensors")) == 0);

  // Chain parity: metric pass is computed; atol/rtol null under mode metric.
  CHECK(str(at(chain, "judgment")) == "chain_parity");
  CHECK(str(at(chain, "direction")) == "fwd");
  CHECK(str(at(at(chain, "threshold"), "mode")) == "metric");
  CHECK(at(at(chain, "threshold"), "atol").is_null());
  REQUIRE(size(at(chain, "metrics")) == 2);
  element mt0 = at(at(chain, "metrics"), 0), mt1 = at(at(chain, "metrics"), 1);
  CHECK(str(at(mt0, "name")) == "max_abs_dlogp");
  same_double(at(mt0, "value"), 0.0123);
  same_double(at(mt0, "threshold"), 0.06);
  CHECK(boolean(at(mt0, "passed")));
  CHECK(str(at(mt0, "source")) == e.cells[3].metrics[0].source);
  CHECK(at(mt1, "threshold").is_null());
  CHECK(at(mt1, "passed").is_null());
  CHECK(at(mt1, "source").is_null());

  // Summary and verdict derived from the cells.
  element sum = at(doc, "summary");
  CHECK(i64(at(sum, "green")) == 2);
  CHECK(i64(at(sum, "red")) == 1);
  CHECK(i64(at(sum, "na")) == 1);
  CHECK(i64(at(sum, "total")) == 4);
  CHECK(str(at(doc, "verdict")) == "red");
}

TEST_CASE("evidence: every written double reads back bit-identical", "[evidence]") {
  std::vector<double> values = {
      0.0, -0.0, std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
      2.2250738585072009e-308,  // largest subnormal
      std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
      std::numeric_limits<double>::lowest(), std::numeric_limits<double>::epsilon(),
      0.1, 1.0 / 3.0, 1e23, 9007199254740993.0, 0.30000000000000004, 5e-324, 1e-310,
      123456789012345678.0, 1.0, 2.0, 0.5, 1e300, 4.9406564584124654e-324};
  // Random bit patterns over the whole finite range, plus random "ordinary" values.
  std::mt19937_64 gen(20260812);
  while (values.size() < 4000) {
    const double d = std::bit_cast<double>(gen());
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(std::ldexp(static_cast<double>(gen() >> 11), -53) * 1e-3);
  }
  ws1::Evidence e = ws1::test::sample_evidence();
  ws1::Cell& c = e.cells[2];  // the N/A cell: it may carry anything
  for (std::size_t i = 0; i + 4 <= values.size(); i += 4) {
    ws1::AccuracyTensor t;
    t.name = "t" + std::to_string(i);
    t.shape = {0};  // empty tensor: numel 0, no worst element
    t.abs_error = {values[i], values[i + 1], values[i + 2], values[i + 3]};
    c.accuracy.push_back(t);
  }
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  simdjson::dom::parser parser;
  element doc;
  REQUIRE(parser.parse(*text).get(doc) == simdjson::SUCCESS);
  element tensors = at(at(at(doc, "cells"), 2), "tensors");
  REQUIRE(size(tensors) == c.accuracy.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < c.accuracy.size(); ++i) {
    element s = at(at(tensors, i), "abs_error");
    const ws1::ErrorStats& st = c.accuracy[i].abs_error;
    for (auto [key, v] : {std::pair{"max", st.max}, std::pair{"mean", st.mean},
                          std::pair{"p99", st.p99}, std::pair{"p999", st.p999}}) {
      if (bits(read_float(at(s, key))) != bits(v)) {
        ++mismatches;
        UNSCOPED_INFO("value " << v);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("evidence: NaN and infinities are the explicit strings, never null", "[evidence]") {
  ws1::Evidence e = ws1::test::sample_evidence();
  ws1::AccuracyTensor& t = e.cells[2].accuracy.emplace_back();
  t.name = "nonfinite";
  t.shape = {0};
  const double inf = std::numeric_limits<double>::infinity();
  t.abs_error = {std::numeric_limits<double>::quiet_NaN(), inf, -inf,
                 -std::numeric_limits<double>::signaling_NaN()};
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  simdjson::dom::parser parser;
  element doc;
  REQUIRE(parser.parse(*text).get(doc) == simdjson::SUCCESS);
  element s = at(at(at(at(at(doc, "cells"), 2), "tensors"), 0), "abs_error");
  CHECK(str(at(s, "max")) == "nan");
  CHECK(str(at(s, "mean")) == "inf");
  CHECK(str(at(s, "p99")) == "-inf");
  CHECK(str(at(s, "p999")) == "nan");
}

TEST_CASE("evidence: summary and verdict follow the cells", "[evidence]") {
  ws1::Evidence e = ws1::test::sample_evidence();
  ws1::Summary s = ws1::summarize(e.cells);
  CHECK(s.green == 2);
  CHECK(s.red == 1);
  CHECK(s.na == 1);
  CHECK(s.total == 4);
  CHECK(ws1::overall_verdict(s) == ws1::Verdict::kRed);
  e.cells.erase(e.cells.begin() + 1);  // drop the red cell
  s = ws1::summarize(e.cells);
  CHECK(s.red == 0);
  CHECK(s.total == 3);
  CHECK(ws1::overall_verdict(s) == ws1::Verdict::kGreen);
  std::vector<ws1::Cell> only_na = {e.cells[1]};
  CHECK(ws1::overall_verdict(ws1::summarize(only_na)) == ws1::Verdict::kNa);
  CHECK(ws1::overall_verdict(ws1::summarize({})) == ws1::Verdict::kNa);
  // The written summary is the computed one, whatever the cells say.
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  simdjson::dom::parser parser;
  element doc;
  REQUIRE(parser.parse(*text).get(doc) == simdjson::SUCCESS);
  CHECK(i64(at(at(doc, "summary"), "green")) == 2);
  CHECK(i64(at(at(doc, "summary"), "red")) == 0);
  CHECK(i64(at(at(doc, "summary"), "total")) == 3);
  CHECK(str(at(doc, "verdict")) == "green");
}

TEST_CASE("evidence: without a GPU the artifact says so, with cpu_bf16", "[evidence]") {
  ws1::Evidence e = ws1::test::sample_evidence();
  e.environment = ws1::read_environment();
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  simdjson::dom::parser parser;
  element doc;
  REQUIRE(parser.parse(*text).get(doc) == simdjson::SUCCESS);
  element env = at(doc, "environment");
  CHECK(at(env, "gpu").is_null());
  CHECK_FALSE(str(at(env, "gpu_absent_reason")).empty());
  CHECK(str(at(env, "backend")) == "cpu_bf16");
  CHECK(str(at(env, "autocast")) == "not applicable to this runtime");
}

TEST_CASE("evidence: invalid UTF-8 in a string does not abort the write", "[evidence]") {
  ws1::Evidence e = ws1::test::sample_evidence();
  e.command.push_back(std::string("bad\xff\xfe"));
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  simdjson::dom::parser parser;
  element doc;
  CHECK(parser.parse(*text).get(doc) == simdjson::SUCCESS);
}

TEST_CASE("evidence: written file equals evidence_json and ends with a newline", "[evidence]") {
  ws1::test::TempDir tmp;
  const ws1::Evidence e = ws1::test::sample_evidence();
  auto path = ws1::write_evidence(e, tmp.path(), "run");
  REQUIRE(path.ok());
  auto text = ws1::evidence_json(e, path->string());
  REQUIRE(text.ok());
  CHECK(slurp(*path) == *text);
  CHECK(text->back() == '\n');
}
