// The accuracy judge on the device (ws1cuda/device_judge.hpp) gives the host judge's record bit
// for bit: counts, every statistic (max, mean, P99, P99.9 of abs, rel and ulp, doubles compared
// by their bits), the worst element, the notes. Pairs of every kind the judge distinguishes:
// equal bits, errors of all sizes, +0 against -0, NaN on either side, equal and unequal
// infinities, pairs on the bound itself (the exact test's band: a zero allowance), bf16 and f32
// candidates, sizes from 1 element to past the host judge's chunk and the device's grid.
// Planted defects go red on the device with the host's index and values. Tolerances are the
// contract's rows.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "gpu_test_support.hpp"
#include "ws1/accuracy_parts.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op.hpp"
#include "ws1cuda/device_judge.hpp"

using namespace ws1;

namespace {

const Contract& contract() { return test::workload("ws1-smoke").contract; }

Tolerance row(Judgment j, OpClass c, ContractDType t) {
  auto r = contract().threshold(j, c, t, "sm_90");
  REQUIRE(r);
  REQUIRE(r->tolerance.has_value());
  return *r->tolerance;
}

std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

void require_same_stats(const ErrorStats& a, const ErrorStats& b) {
  CHECK(bits(a.max) == bits(b.max));
  CHECK(bits(a.mean) == bits(b.mean));
  CHECK(bits(a.p99) == bits(b.p99));
  CHECK(bits(a.p999) == bits(b.p999));
}

// The device record equals the host's in every field but the engine.
void require_same_record(const AccuracyTensor& host, const AccuracyTensor& dev) {
  CHECK(host.engine == "host");
  CHECK(dev.engine == "cuda");
  CHECK(dev.name == host.name);
  CHECK(dev.shape == host.shape);
  CHECK(dev.dtype == host.dtype);
  CHECK(dev.numel == host.numel);
  CHECK(dev.violations == host.violations);
  CHECK(dev.nan_elements == host.nan_elements);
  CHECK(dev.comparable == host.comparable);
  CHECK(dev.notes == host.notes);
  require_same_stats(host.abs_error, dev.abs_error);
  require_same_stats(host.rel_error, dev.rel_error);
  require_same_stats(host.ulp_distance, dev.ulp_distance);
  REQUIRE(dev.worst.has_value() == host.worst.has_value());
  if (host.worst) {
    CHECK(dev.worst->index == host.worst->index);
    CHECK(bits(dev.worst->candidate) == bits(host.worst->candidate));
    CHECK(bits(dev.worst->reference) == bits(host.worst->reference));
    CHECK(bits(dev.worst->allowed) == bits(host.worst->allowed));
    CHECK(bits(dev.worst->margin) == bits(host.worst->margin));
    CHECK(dev.worst->violates == host.worst->violates);
  }
  // The null candidates (D29).
  REQUIRE(dev.reference_max_abs.has_value() == host.reference_max_abs.has_value());
  if (host.reference_max_abs) CHECK(bits(*dev.reference_max_abs) == bits(*host.reference_max_abs));
  CHECK(dev.zeros_pass == host.zeros_pass);
  REQUIRE(dev.bias_ulp.has_value() == host.bias_ulp.has_value());
  if (host.bias_ulp) CHECK(bits(*dev.bias_ulp) == bits(*host.bias_ulp));
  CHECK(dev.signs == host.signs);  // the bias rule's sign counts
}

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-42; }  // [0, 1)
};

// Kinds of planted pairs, mixed into a stream of near-equal values of varied magnitude.
struct Mix {
  double equal = 0.3, zero_pair = 0.01, nan = 0, inf = 0;
};

// candidate (bf16 or f32) and FP32 reference of n elements.
std::pair<Tensor, Tensor> make(std::int64_t n, DType ct, std::uint64_t seed, Mix mix) {
  Tensor c(ct, {n}), r(DType::kF32, {n});
  Rng g{seed};
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t i = 0; i < n; ++i) {
    const double mag = std::ldexp(1.0, static_cast<int>(g.next() % 24) - 16);  // 2^-16 .. 2^7
    float rv = static_cast<float>((g.uniform() * 2 - 1) * mag);
    // An error of 0 .. ~2^-6 relative, sometimes far larger (violations).
    const double rel = g.uniform() < 0.001 ? 0.5 : g.uniform() * 0x1p-6;
    float cv = static_cast<float>(rv * (1 + (g.uniform() < 0.5 ? rel : -rel)));
    const double u = g.uniform();
    if (u < mix.equal) {
      cv = rv;
    } else if (u < mix.equal + mix.zero_pair) {
      rv = g.uniform() < 0.5 ? 0.0f : -0.0f;
      cv = -rv;
    } else if (u < mix.equal + mix.zero_pair + mix.nan) {
      (g.uniform() < 0.5 ? cv : rv) = nan;
    } else if (u < mix.equal + mix.zero_pair + mix.nan + mix.inf) {
      const float s = g.uniform() < 0.5 ? inf : -inf;
      rv = s;
      cv = g.uniform() < 0.5 ? s : (g.uniform() < 0.5 ? -s : 1.0f);
    }
    if (ct == DType::kBF16) {
      if (u < mix.equal) rv = from_bf16(to_bf16(rv));  // equal bits need a bf16 reference
      c.data<std::uint16_t>()[i] = to_bf16(cv).bits;
      if (u < mix.equal) cv = rv;
    } else {
      c.data<float>()[i] = cv;
    }
    r.data<float>()[i] = rv;
  }
  return {c, r};
}

void check_pair(const Tensor& c, const Tensor& r, const Tolerance& tol) {
  const AccuracyTensor host = judge_accuracy("t", c, r, tol);
  const AccuracyTensor dev = judge_accuracy("t", ws1cuda::to_device_tensor(c), ws1cuda::to_device_tensor(r), tol);
  require_same_record(host, dev);
}

}  // namespace

TEST_CASE("device judge: the host judge's record, bit for bit", "[gpu][judge]") {
  (void)test::cuda_backend();  // opens the device and installs the device judge
  const Tolerance bf16_row = row(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  const Tolerance f32_row = row(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kFloat32);
  const Tolerance zero_row = row(Judgment::kForwardInvariance, OpClass::kReduction, ContractDType::kBFloat16);
  REQUIRE(zero_row.atol == 0);  // every pair with no error is on its bound: the exact test's band
  const std::int64_t sizes[] = {1, 17, 4096, 4097, 1'000'003, (std::int64_t{1} << 22) + 4096 * 3 + 5,
                                (std::int64_t{1} << 25) + 12345};
  std::uint64_t seed = 1;
  for (const std::int64_t n : sizes) {
    for (const DType ct : {DType::kBF16, DType::kF32}) {
      const Tolerance& tol = ct == DType::kBF16 ? bf16_row : f32_row;
      DYNAMIC_SECTION("n " << n << " " << dtype_contract_name(ct)) {
        auto [c, r] = make(n, ct, ++seed, Mix{});
        check_pair(c, r, tol);
        check_pair(c, r, zero_row);
        auto [cn, rn] = make(n, ct, ++seed, Mix{0.3, 0.01, 1e-4, 1e-4});  // NaNs and infinities
        check_pair(cn, rn, tol);
        auto [ce, re] = make(n, ct, ++seed, Mix{1.0, 0, 0, 0});  // every pair equal
        check_pair(ce, re, tol);
      }
    }
  }
}

TEST_CASE("device judge: planted defects are red on the device with the host's index", "[gpu][judge]") {
  (void)test::cuda_backend();
  const Tolerance tol = row(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  const std::int64_t n = 3'000'017;
  auto [c, r] = make(n, DType::kBF16, 99, Mix{1.0, 0, 0, 0});
  const AccuracyTensor clean = judge_accuracy("y", ws1cuda::to_device_tensor(c), ws1cuda::to_device_tensor(r), tol);
  REQUIRE(clean.engine == "cuda");
  REQUIRE(passed(clean));

  // One element far outside its allowance.
  const std::int64_t at = 2'345'678;
  Tensor bad = c.contiguous();
  bad.data<std::uint16_t>()[at] = to_bf16(r.data<float>()[at] + 1.0f).bits;
  const AccuracyTensor red = judge_accuracy("y", ws1cuda::to_device_tensor(bad), ws1cuda::to_device_tensor(r), tol);
  CHECK(red.engine == "cuda");
  CHECK_FALSE(passed(red));
  CHECK(red.violations == 1);
  REQUIRE(red.worst);
  CHECK(red.worst->index == Dims{at});
  CHECK(red.worst->violates);
  CHECK(accuracy_verdict(std::vector<AccuracyTensor>{red}) == Verdict::kRed);

  // A NaN: a violation, out of the statistics, named in the notes.
  Tensor nan = c.contiguous();
  nan.data<std::uint16_t>()[17] = 0x7fc1;
  const AccuracyTensor nan_red = judge_accuracy("y", ws1cuda::to_device_tensor(nan), ws1cuda::to_device_tensor(r), tol);
  CHECK(nan_red.engine == "cuda");
  CHECK_FALSE(passed(nan_red));
  CHECK(nan_red.nan_elements == 1);
  REQUIRE(nan_red.worst);
  CHECK(nan_red.worst->index == Dims{17});
  CHECK(std::isnan(nan_red.worst->candidate));
}

TEST_CASE("device judge: a large op output stays on the device and is judged there", "[gpu][judge]") {
  // silu on 2^23 bf16 elements (16 MiB out): at least kKeepOnDeviceBytes, so the backend's
  // output is held on the device; a 256-element one is copied to the host at once.
  Backend& cuda = test::cuda_backend();
  const Op* silu = find_op_impl("silu");
  REQUIRE(silu != nullptr);
  const std::int64_t n = std::int64_t{1} << 23;
  auto [x, unused] = make(n, DType::kBF16, 5, Mix{});
  auto out = cuda.forward(*silu, {{"x", x}}, OpContext{});
  REQUIRE(out);
  REQUIRE(out->size() == 1);
  const Tensor& y = out->front().tensor;
  CHECK(y.device_data() != nullptr);
  auto small = cuda.forward(*silu, {{"x", x.slice(0, 0, 256).contiguous()}}, OpContext{});
  REQUIRE(small);
  CHECK(small->front().tensor.device_data() == nullptr);

  // Judged on the device against the same values as the reference side: all equal.
  const Tensor y_host = y.contiguous();  // a host copy (fetches y's bytes, keeps y on the device)
  Tensor ref(DType::kF32, {n});
  for (std::int64_t i = 0; i < n; ++i) ref.data<float>()[i] = from_bf16(bf16{y_host.data<std::uint16_t>()[i]});
  const Tolerance tol = row(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  const AccuracyTensor d = judge_accuracy("y", y, ws1cuda::to_device_tensor(ref), tol);
  CHECK(d.engine == "cuda");
  CHECK(d.violations == 0);
  CHECK(d.abs_error.max == 0);
  CHECK(y.device_data() != nullptr);  // a host read keeps the device copy
}
