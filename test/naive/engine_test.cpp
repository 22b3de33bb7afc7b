// The naive engine as a whole: it defines every op of the catalogue, and on each op's primary
// normal fixture it answers with exactly the tensors (names, dtypes, shapes) the op declares
// and the FP32 reference gives, forward and backward; an unknown op is bad input.
#include "naive_test_support.hpp"

using namespace ws1;

TEST_CASE("naive: every op is defined and answers with the op's declared tensors", "[naive][engine]") {
  const OpContext ctx = test::workload("ws1-smoke").run_context().op_context;
  for (const Op* op : all_ops()) {
    const std::string name(op->name());
    INFO(name);
    REQUIRE(naive::defines(name));
    const Tensors in = test::fixture_inputs(name + "/primary/normal");
    for (const bool backward : {false, true}) {
      INFO((backward ? "backward" : "forward"));
      const std::vector<TensorDecl> decls = backward ? op->gradients() : op->outputs();
      if (decls.empty()) continue;
      auto got = backward ? naive::backward(name, in, ctx) : naive::forward(name, in, ctx);
      INFO((got.ok() ? std::string() : got.error().message()));
      REQUIRE(got.ok());
      auto ref = backward ? ref::backward(name, in, ctx) : ref::forward(name, in, ctx);
      REQUIRE(ref.ok());
      CHECK(got->size() == decls.size());
      for (const TensorDecl& d : decls) {
        INFO(d.name);
        const Tensor& t = test::tensor_named(*got, d.name);
        CHECK(t.dtype() == d.candidate_dtype);
        CHECK(t.shape() == test::tensor_named(*ref, d.name).shape());
      }
    }
  }
}

TEST_CASE("naive: an unknown op is bad input naming it", "[naive][engine]") {
  const OpContext ctx = test::workload("ws1-smoke").run_context().op_context;
  CHECK_FALSE(naive::defines("softmax"));
  auto r = naive::forward("softmax", {}, ctx);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::kBadInput);
  CHECK_THAT(r.error().message(), Catch::Contains("softmax"));
}
