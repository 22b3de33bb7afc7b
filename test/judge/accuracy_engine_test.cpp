// What lets the device judge (cuda/judge) match the host judge bit for bit: the means are a
// fixed tree sum (ws1/accuracy_parts.hpp), not a sum in whatever order a thread visits the
// elements; and judge_accuracy() hands a pair to the installed device judge only when both
// tensors are held on a device, using the host judge where the device judge declines.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "fake_device_copy.hpp"
#include "judge_test_support.hpp"
#include "ws1/accuracy_parts.hpp"
#include "ws1/numeric.hpp"

using judge_test::tolerance;
using ws1::ContractDType;
using ws1::Judgment;
using ws1::OpClass;

namespace {

// The stride-halving tree of accuracy_parts.hpp, restated: pairs (j, j + m), largest m first.
double tree(std::vector<double> v) {
  while (v.size() > 1) {
    const std::size_t m = v.size() / 2;
    std::vector<double> next(m);
    for (std::size_t j = 0; j < m; ++j) next[j] = v[j] + v[j + m];
    v = std::move(next);
  }
  return v.empty() ? 0.0 : v[0];
}

double documented_sum(const std::vector<double>& values) {
  std::vector<double> blocks;
  for (std::size_t b = 0; b < values.size(); b += ws1::kSumBlock) {
    // 256 lanes, each adding every 256th value of the leaf left to right (padding: +0).
    std::vector<double> lanes(ws1::kSumLanes, 0.0);
    for (std::size_t t = 0; t < lanes.size(); ++t) {
      double lane = 0;
      for (std::size_t i = b + t; i < b + ws1::kSumBlock; i += ws1::kSumLanes)
        lane += i < values.size() ? values[i] : 0.0;
      lanes[t] = lane;
    }
    blocks.push_back(tree(std::move(lanes)));
  }
  blocks.resize(std::bit_ceil(std::max<std::size_t>(blocks.size(), 1)), 0.0);
  return tree(std::move(blocks));
}

// n pseudo-random pairs of f32 values with full mantissas over a wide range of exponents, so
// that their errors do not sum exactly in double and the order of the sum shows in its bits.
struct Pairs {
  ws1::Tensor candidate, reference;
  std::vector<double> abs;  // |c - r| per element (exact in double)
};
Pairs make_pairs(std::int64_t n) {
  Pairs p{ws1::Tensor(ws1::DType::kF32, {n}), ws1::Tensor(ws1::DType::kF32, {n}), {}};
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  const auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 16;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    const int e = static_cast<int>(next() % 26) - 20;  // 2^-20 .. 2^5
    const float r = std::ldexp(1.0f + static_cast<float>(next() & 0x7fffff) * 0x1p-23f, e);
    const float c = r * (1.0f + static_cast<float>(static_cast<std::int64_t>(next() & 0xffff) - 0x8000) * 0x1p-22f);
    p.candidate.data<float>()[i] = c;
    p.reference.data<float>()[i] = r;
    p.abs.push_back(std::fabs(static_cast<double>(c) - static_cast<double>(r)));
  }
  return p;
}

int g_calls = 0;
std::optional<ws1::AccuracyTensor> fake_judge(const std::string& name, const ws1::Tensor&,
                                              const ws1::Tensor&, const ws1::Tolerance&) {
  ++g_calls;
  ws1::AccuracyTensor t;
  t.name = name;
  t.engine = "fake";
  return t;
}
std::optional<ws1::AccuracyTensor> declining_judge(const std::string&, const ws1::Tensor&,
                                                   const ws1::Tensor&, const ws1::Tolerance&) {
  ++g_calls;
  return std::nullopt;
}

struct Installed {  // the device judge for one test's scope
  explicit Installed(ws1::DeviceAccuracyJudge j) { ws1::set_device_accuracy_judge(j); }
  ~Installed() { ws1::set_device_accuracy_judge(nullptr); }
};

}  // namespace

TEST_CASE("accuracy: a mean is the documented tree sum, across chunk boundaries", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kFloat32);
  // Past one 4 Mi-element chunk of the host judge, with a partial last block.
  const std::int64_t n = (std::int64_t{1} << 22) + 3 * ws1::kSumBlock + 1234;
  const Pairs p = make_pairs(n);
  const ws1::AccuracyTensor a = ws1::judge_accuracy("y", p.candidate, p.reference, tol);
  REQUIRE(a.comparable);
  REQUIRE(a.nan_elements == 0);
  const double expected = documented_sum(p.abs) / static_cast<double>(n);
  CHECK(std::bit_cast<std::uint64_t>(a.abs_error.mean) == std::bit_cast<std::uint64_t>(expected));
  // The order matters for these values: a plain running sum gives other bits, so the check
  // above tells the two orders apart.
  double running = 0;
  for (double v : p.abs) running += v;
  CHECK(running / static_cast<double>(n) != expected);
  CHECK(a.engine == "host");
}

TEST_CASE("accuracy: sum_of_blocks pads to a power of two", "[judge]") {
  CHECK(ws1::sum_of_blocks({}) == 0.0);
  CHECK(ws1::sum_of_blocks({0.1}) == 0.1);
  // ((a + c) + (b + 0)) = 1 + 2^-52 exactly; the running sum (a + b) + c rounds to 1.
  const double a = 0x1p-53, b = 1.0, c = 0x1p-53;
  CHECK(ws1::sum_of_blocks({a, b, c}) == (a + c) + b);
  CHECK(ws1::sum_of_blocks({a, b, c}) != (a + b) + c);
}

TEST_CASE("accuracy: the device judge is asked only when both sides are on a device", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kFloat32);
  const Pairs p = make_pairs(5000);
  const ws1_test::FakeDeviceTensor dc = ws1_test::fake_device(p.candidate);
  const ws1_test::FakeDeviceTensor dr = ws1_test::fake_device(p.reference);
  const ws1::AccuracyTensor host = ws1::judge_accuracy("y", p.candidate, p.reference, tol);
  {
    Installed on(fake_judge);
    g_calls = 0;
    CHECK(ws1::judge_accuracy("y", dc.tensor, dr.tensor, tol).engine == "fake");
    CHECK(g_calls == 1);
    CHECK(dc.copy->fetches == 0);  // nothing came to the host
    CHECK(ws1::judge_accuracy("y", p.candidate, dr.tensor, tol).engine == "host");
    CHECK(ws1::judge_accuracy("y", dc.tensor, p.reference, tol).engine == "host");
    // An incomparable pair never reaches it.
    CHECK_FALSE(ws1::judge_accuracy("y", dc.tensor.slice(0, 0, 10), dr.tensor, tol).comparable);
    CHECK(g_calls == 1);
  }
  {
    Installed on(declining_judge);
    g_calls = 0;
    const ws1::AccuracyTensor a = ws1::judge_accuracy("y", dc.tensor, dr.tensor, tol);
    CHECK(g_calls == 1);
    CHECK(a.engine == "host");
    CHECK(a.violations == host.violations);
    CHECK(a.abs_error.mean == host.abs_error.mean);
    CHECK(a.abs_error.p999 == host.abs_error.p999);
  }
  g_calls = 0;
  CHECK(ws1::judge_accuracy("y", dc.tensor, dr.tensor, tol).engine == "host");  // none installed
  CHECK(g_calls == 0);
}
