#include "judge_test_support.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "test_paths.hpp"
#include "ws1/numeric.hpp"

namespace judge_test {

const ws1::Contract& contract() {
  static const ws1::Contract c = [] {
    auto r = ws1::load_contract(ws1::test::source_root() / "contracts" / "ws1-c1-v2.json");
    INFO((r.ok() ? std::string() : r.error().message()));
    REQUIRE(r.ok());
    return std::move(r).value();
  }();
  return c;
}

ws1::Tolerance tolerance(ws1::Judgment j, ws1::OpClass c, ws1::ContractDType t) {
  const auto th = contract().threshold(j, c, t);
  REQUIRE(th.ok());
  REQUIRE(th->tolerance.has_value());
  return *th->tolerance;
}

ws1::Tensor f32(ws1::Shape shape, const std::vector<float>& values) {
  ws1::Tensor t(ws1::DType::kF32, std::move(shape));
  REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

ws1::Tensor bf16(ws1::Shape shape, const std::vector<float>& values) {
  ws1::Tensor t(ws1::DType::kBF16, std::move(shape));
  REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
  auto* out = t.data<ws1::bf16>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = ws1::to_bf16(values[i]);
    if (!std::isnan(values[i])) REQUIRE(ws1::from_bf16(out[i]) == values[i]);
  }
  return t;
}

ws1::Tensor from_bits16(ws1::DType t, ws1::Shape shape, const std::vector<std::uint16_t>& bits) {
  ws1::Tensor x(t, std::move(shape));
  REQUIRE(ws1::dtype_size(t) == 2);
  REQUIRE(static_cast<std::size_t>(x.numel()) == bits.size());
  if (!bits.empty()) std::memcpy(x.raw(), bits.data(), bits.size() * 2);
  return x;
}

ws1::Tensor from_bits32(ws1::Shape shape, const std::vector<std::uint32_t>& bits) {
  ws1::Tensor x(ws1::DType::kF32, std::move(shape));
  REQUIRE(static_cast<std::size_t>(x.numel()) == bits.size());
  if (!bits.empty()) std::memcpy(x.raw(), bits.data(), bits.size() * 4);
  return x;
}

float value_at(const ws1::Tensor& t, std::int64_t flat) { return t.data<float>()[flat]; }

namespace {

__extension__ typedef unsigned __int128 u128;

// A signed term m * 2^e of the oracle (m < 2^106: a double's or a product's mantissa).
struct Term {
  u128 m = 0;
  int e = 0;
  bool neg = false;
};

Term term(double x) {
  REQUIRE(std::isfinite(x));
  if (x == 0) return {};
  int ex = 0;
  const double f = std::frexp(std::fabs(x), &ex);  // |x| = f * 2^ex, 0.5 <= f < 1
  return {static_cast<u128>(static_cast<std::uint64_t>(std::ldexp(f, 53))), ex - 53, x < 0};
}

Term product(Term a, Term b) { return {a.m * b.m, a.e + b.e, a.neg != b.neg}; }

// A non-negative fixed-point number: bit i of the limbs weighs 2^(i + kLow). Wide enough for
// any float, any float times a tolerance above 2^-100, and a few carries.
constexpr int kLow = -400;
constexpr int kLimbs = 10;
using Big = std::array<std::uint64_t, kLimbs>;

void add_bit(Big& b, int weight) {
  const int pos = weight - kLow;
  if (pos < 0 || pos >= 64 * kLimbs - 8) FAIL("a term outside the oracle's range: 2^" << weight);
  for (auto i = static_cast<std::size_t>(pos / 64); i < b.size(); ++i) {
    const std::uint64_t add =
        i == static_cast<std::size_t>(pos / 64) ? std::uint64_t{1} << (pos % 64) : 1;
    b[i] += add;
    if (b[i] >= add) return;  // no carry out of this limb
  }
  FAIL("overflow in the oracle");
}

void add_term(Big& b, const Term& t) {
  for (int bit = 0; bit < 128; ++bit)
    if ((t.m >> bit) & 1) add_bit(b, t.e + bit);
}

// Sum of the terms <= 0, exactly: positive terms on one side, negative ones on the other.
bool sum_at_most_zero(std::initializer_list<Term> terms) {
  Big pos{}, negs{};
  for (const Term& t : terms) add_term(t.neg ? negs : pos, t);
  for (std::size_t i = kLimbs; i-- > 0;)
    if (pos[i] != negs[i]) return pos[i] < negs[i];
  return true;
}

Term negated(Term t) {
  t.neg = !t.neg;
  return t;
}

}  // namespace

bool exact_within(float c, float r, double atol, double rtol) {
  // |c - r| <= atol + rtol*|r|  <=>  c - r - atol - rtol*|r| <= 0  and  r - c - atol - rtol*|r| <=
  // 0
  const Term tc = term(c), tr = term(r), ta = negated(term(atol));
  const Term tp = negated(product(term(rtol), term(std::fabs(r))));
  return sum_at_most_zero({tc, negated(tr), ta, tp}) && sum_at_most_zero({tr, negated(tc), ta, tp});
}

std::int64_t ord(float x, ws1::DType t) {
  if (t == ws1::DType::kBF16) {
    const ws1::bf16 h = ws1::to_bf16(x);
    REQUIRE(ws1::from_bf16(h) == x);
    return (h.bits & 0x8000u) ? -static_cast<std::int64_t>(h.bits & 0x7fffu) : h.bits;
  }
  REQUIRE(t == ws1::DType::kF32);
  const std::uint32_t u = ws1::float_bits(x);
  return (u >> 31) ? -static_cast<std::int64_t>(u & 0x7fffffffu) : static_cast<std::int64_t>(u);
}

float from_ord(std::int64_t o, ws1::DType t) {
  if (t == ws1::DType::kBF16) {
    const auto bits = static_cast<std::uint16_t>(o >= 0 ? o : (0x8000 | -o));
    return ws1::from_bf16(ws1::bf16{bits});
  }
  const auto bits = static_cast<std::uint32_t>(o >= 0 ? o : (0x80000000LL | -o));
  return ws1::float_from_bits(bits);
}

}  // namespace judge_test
