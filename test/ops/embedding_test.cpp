// embedding: the gather is exact on both paths; dtable's FP32 scatter-add against PyTorch
// float64 (repeated ids), its fixed summation order, determinism, bad ids, and a planted
// defect (an off-by-one gather) that the accuracy judge must catch.
#include "elementwise_test_util.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("embedding");
  REQUIRE(o != nullptr);
  return *o;
}

const std::map<std::string, std::string> kRename = {
    {"in.ids", "ids"}, {"in.table", "table"}, {"dy.y", "dy.y"}};

// The oracle's inputs (ids with repeats, table [256, 4096]).
Tensors oracle_or_local() { return oracle_inputs(*oracle("embedding"), kRename); }

std::vector<std::int64_t> ids_of(const Tensors& in) {
  const Tensor& t = *find_tensor(in, "ids");
  return {t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel()};
}

}  // namespace

TEST_CASE("embedding reference agrees with PyTorch float64: exact gather, dtable in the float32 row", "[ops][embedding]") {
  auto f = oracle("embedding");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  const Tensor& y = output(op().reference_forward(in, ctx), "y");
  CHECK(y.dtype() == DType::kF32);
  const auto fa = agree(y, *f->find("ref64.y"),
                        tolerance(Judgment::kForwardAccuracy, "embedding", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  CHECK(fa.max_abs == 0);  // a gather is exact
  const Tensor& dtable = output(op().reference_backward(in, ctx), "dtable");
  CHECK(dtable.dtype() == DType::kF32);
  const auto ga = agree(dtable, *f->find("gref64.table"),
                        tolerance(Judgment::kGradientAccuracy, "embedding", ContractDType::kFloat32));
  CHECK(ga.violations == 0);
  CHECK(ga.max_abs < tolerance(Judgment::kGradientAccuracy, "embedding", ContractDType::kBFloat16).atol / 100);
}

TEST_CASE("embedding candidate: bf16 row copies; dtable summed by id then token index, rounded once", "[ops][embedding]") {
  const Tensors in = oracle_or_local();
  const std::vector<std::int64_t> ids = ids_of(in);
  const Tensor& table = *find_tensor(in, "table");
  const Tensor& dy = *find_tensor(in, "dy.y");
  const std::int64_t h = table.shape()[1];
  OpContext one = default_context(), two = default_context();
  one.threads = 1;
  two.threads = 2;

  const Tensor y = output(op().cpu_forward(in, two), "y");
  REQUIRE(y.dtype() == DType::kBF16);
  for (std::size_t t = 0; t < ids.size(); ++t)
    CHECK(same_bits(y.select(0, static_cast<std::int64_t>(t)), table.select(0, ids[t])));
  CHECK(same_bits(y, output(op().cpu_forward(in, one), "y")));
  // Tokens [0, 8) in one call equal [0, 3) and [3, 8) in two calls.
  auto part = [&](std::size_t b, std::size_t e) {
    return Tensors{{"ids", i64_tensor({static_cast<std::int64_t>(e - b)}, {ids.begin() + b, ids.begin() + e})},
                   {"table", table}};
  };
  CHECK(same_bits(y, concat_rows(output(op().cpu_forward(part(0, 3), two), "y"),
                                 output(op().cpu_forward(part(3, ids.size()), two), "y"))));

  const Tensor dtable = output(op().cpu_backward(in, two), "dtable");
  REQUIRE(dtable.dtype() == DType::kBF16);
  REQUIRE(dtable.shape() == table.shape());
  const Tensor ref = output(op().reference_backward(in, two), "dtable");
  CHECK(same_bits(dtable, rounded_bf16(ref)));
  CHECK(same_bits(dtable, output(op().cpu_backward(in, one), "dtable")));
  CHECK(same_bits(dtable, output(op().cpu_backward(in, two), "dtable")));

  // The pinned order: for each id, +0 then its tokens' dy rows left to right in FP32.
  const std::vector<float> dyf = floats(dy), reff = floats(ref);
  for (std::int64_t v = 0; v < table.shape()[0]; ++v) {
    std::vector<float> acc(static_cast<std::size_t>(h), 0.0f);
    for (std::size_t t = 0; t < ids.size(); ++t)
      if (ids[t] == v)
        for (std::int64_t c = 0; c < h; ++c)
          acc[static_cast<std::size_t>(c)] += dyf[t * static_cast<std::size_t>(h) + static_cast<std::size_t>(c)];
    std::int64_t differ = 0;
    for (std::int64_t c = 0; c < h; ++c)
      if (float_bits(acc[static_cast<std::size_t>(c)]) != float_bits(reff[static_cast<std::size_t>(v * h + c)])) ++differ;
    INFO("row " << v);
    CHECK(differ == 0);
  }
}

TEST_CASE("embedding refuses ids outside the table and inputs that do not fit", "[ops][embedding]") {
  const OpContext ctx = default_context();
  const Tensor table(DType::kBF16, {16, 8});
  auto expect = [&](Result<Tensors> r, const std::string& text) {
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message());
    CHECK(r.error().message().find(text) != std::string::npos);
  };
  expect(op().cpu_forward({{"ids", i64_tensor({3}, {0, 16, 1})}, {"table", table}}, ctx),
         "embedding: ids: element 1 = 16 is outside [0, 16) (table rows)");
  expect(op().reference_forward({{"ids", i64_tensor({2}, {-1, 0})}, {"table", table}}, ctx),
         "embedding: ids: element 0 is -1, not a row of the table [0, 16)");
  expect(op().cpu_backward({{"ids", i64_tensor({2}, {3, 99})}, {"table", table},
                            {"dy.y", Tensor(DType::kBF16, {2, 8})}}, ctx),
         "embedding: ids: element 1 = 99");
  expect(op().cpu_forward({{"ids", Tensor(DType::kI32, {2})}, {"table", table}}, ctx),
         "embedding: ids: dtype I32");
  expect(op().cpu_forward({{"ids", i64_tensor({1}, {0})}, {"table", Tensor(DType::kBF16, {16})}}, ctx),
         "embedding: table: shape [16] (expected rank 2)");
  expect(op().cpu_backward({{"ids", i64_tensor({2}, {0, 1})}, {"table", table},
                            {"dy.y", Tensor(DType::kBF16, {3, 8})}}, ctx),
         "embedding: dy.y: shape [3, 8] (expected [2, 8])");
  expect(op().reference_backward({{"ids", i64_tensor({2}, {0, 1})}, {"table", table}}, ctx),
         "embedding: dy.y: missing input");
}

TEST_CASE("embedding planted defect: an off-by-one gather goes red", "[ops][embedding][defect]") {
  const Tensors in = oracle_or_local();
  const OpContext ctx = default_context();
  std::vector<std::int64_t> shifted = ids_of(in);
  const std::int64_t vocab = find_tensor(in, "table")->shape()[0];
  for (auto& id : shifted) id = (id + 1) % vocab;
  const Tensors bad_in = {{"ids", i64_tensor({static_cast<std::int64_t>(shifted.size())}, shifted)},
                          {"table", *find_tensor(in, "table")}};
  const Tensor& ref = output(op().reference_forward(in, ctx), "y");
  const auto good = judge_bf16(Judgment::kForwardAccuracy, "embedding", "y",
                               output(op().cpu_forward(in, ctx), "y"), ref);
  const auto bad = judge_bf16(Judgment::kForwardAccuracy, "embedding", "y",
                              output(op().cpu_forward(bad_in, ctx), "y"), ref);
  CHECK(passed(good));
  CHECK(good.abs_error.max == 0);
  CHECK(bad.violations > 0);
}
