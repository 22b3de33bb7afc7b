// The backend and reference registry (ws1/backend.hpp): what a CUDA build registers is opened by
// name like the built-in backends, and the rules about GPUs and defaults are the registry's.
#include <catch2/catch.hpp>

#include "ws1/backend.hpp"
#include "ws1/reference.hpp"

using namespace ws1;

namespace {

// A registered backend that is cpu_bf16 under another name.
class Renamed final : public Backend {
 public:
  explicit Renamed(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::string kernel_id(const Op& op, Direction d) const override { return base_->kernel_id(op, d); }
  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return base_->forward(op, in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return base_->backward(op, in, ctx);
  }

 private:
  std::string name_;
  std::unique_ptr<Backend> base_ = make_cpu_bf16_backend();
};

BackendEntry entry(std::string name, bool needs_gpu, bool default_with_gpu) {
  return {name, needs_gpu, default_with_gpu,
          [name]() -> Result<std::unique_ptr<Backend>> { return std::unique_ptr<Backend>(new Renamed(name)); }};
}

}  // namespace

TEST_CASE("registry: a registered backend opens by name; GPU needs and the default follow its entry",
          "[backend][registry]") {
  register_backend(entry("toy_bf16", false, false));
  auto toy = open_backend("toy_bf16", false);
  REQUIRE(toy.ok());
  CHECK((*toy)->name() == "toy_bf16");
  CHECK(make_backend("toy_bf16").ok());  // make_backend sees the registry too

  register_backend(entry("toy_gpu_bf16", true, true));
  auto no_gpu = open_backend("toy_gpu_bf16", false);
  REQUIRE_FALSE(no_gpu.ok());
  CHECK(no_gpu.error().code == ExitCode::kEnvironment);
  CHECK_THAT(no_gpu.error().message(), Catch::Contains("needs a CUDA device"));
  // The default: the default_with_gpu entry where a GPU is present, else cpu_bf16.
  auto with_gpu = open_backend("", true);
  REQUIRE(with_gpu.ok());
  CHECK((*with_gpu)->name() == "toy_gpu_bf16");
  auto without = open_backend("", false);
  REQUIRE(without.ok());
  CHECK((*without)->name() == "cpu_bf16");
  // Registering a name again replaces its entry: it is no longer the default.
  register_backend(entry("toy_gpu_bf16", true, false));
  auto replaced = open_backend("", true);
  REQUIRE(replaced.ok());
  CHECK((*replaced)->name() == "cpu_bf16");

  auto unknown = open_backend("nope_bf16", true);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ExitCode::kBadInput);
}

TEST_CASE("registry: references: cpu is lib's, others must be registered; cuda_fp32 unbuilt is exit 3",
          "[backend][registry]") {
  auto cpu = open_reference("cpu", false);
  REQUIRE(cpu.ok());
  CHECK(*cpu == nullptr);  // each op's CPU reference (lib/ref)
  auto bad = open_reference("gpu", true);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ExitCode::kBadInput);
  // This test binary registers no CUDA engine: cuda_fp32 is known but not built here.
  auto unbuilt = open_reference("cuda_fp32", true);
  REQUIRE_FALSE(unbuilt.ok());
  CHECK(unbuilt.error().code == ExitCode::kEnvironment);
  CHECK_THAT(unbuilt.error().message(), Catch::Contains("no CUDA"));
  auto no_gpu = open_reference("cuda_fp32", false);
  REQUIRE_FALSE(no_gpu.ok());
  CHECK_THAT(no_gpu.error().message(), Catch::Contains("needs a CUDA device"));
  register_reference({"toy_fp32", false, []() -> Result<std::unique_ptr<ReferenceEngine>> { return make_cpu_reference(); }});
  auto toy = open_reference("toy_fp32", false);
  REQUIRE(toy.ok());
  CHECK(*toy != nullptr);
}
