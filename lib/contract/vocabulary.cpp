// The contract's closed vocabularies: enum <-> spelling, and the spec §2.3 op partition.
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "ws1/contract.hpp"
#include "ws1/op_catalogue.hpp"

namespace ws1 {
namespace {

template <class E>
struct Spelling {
  E value;
  std::string_view name;
};

// Tables are indexed by the enum's value, so name lookup is one array access.
constexpr std::array<Spelling<Judgment>, 4> kJudgments{{
    {Judgment::kForwardAccuracy, "forward_accuracy"},
    {Judgment::kForwardInvariance, "forward_invariance"},
    {Judgment::kGradientAccuracy, "gradient_accuracy"},
    {Judgment::kGradientInvariance, "gradient_invariance"},
}};
constexpr std::array<Spelling<OpClass>, 5> kOpClasses{{
    {OpClass::kElementwise, "elementwise"},
    {OpClass::kReduction, "reduction"},
    {OpClass::kAttention, "attention"},
    {OpClass::kLogprob, "logprob"},
    {OpClass::kMhcController, "mhc_controller"},
}};
constexpr std::array<Spelling<ContractDType>, 4> kDTypes{{
    {ContractDType::kFloat32, "float32"},
    {ContractDType::kBFloat16, "bfloat16"},
    {ContractDType::kFloat16, "float16"},
    {ContractDType::kFloat8, "float8"},
}};
constexpr std::array<Spelling<RowStatus>, 3> kStatuses{{
    {RowStatus::kApplicable, "applicable"},
    {RowStatus::kOptional, "optional"},
    {RowStatus::kOutOfScope, "out_of_scope"},
}};
constexpr std::array<Spelling<CompareMode>, 2> kModes{{
    {CompareMode::kTolerance, "tolerance"},
    {CompareMode::kBitwise, "bitwise"},
}};
constexpr std::array<Spelling<ChainMetric>, 4> kMetrics{{
    {ChainMetric::kMaxAbsDlogp, "max_abs_dlogp"},
    {ChainMetric::kApproxKl0, "approx_kl0"},
    {ChainMetric::kClipfrac0, "clipfrac0"},
    {ChainMetric::kMeanAbsDlogp, "mean_abs_dlogp"},
}};
constexpr std::array<Spelling<RmsNormOrder>, 2> kOrders{{
    {RmsNormOrder::kKernel, "kernel"},
    {RmsNormOrder::kHf, "hf"},
}};
constexpr std::array<Spelling<NanPolicy>, 2> kNanPolicies{{
    {NanPolicy::kFail, "fail"},
    {NanPolicy::kCompareBits, "compare_bits"},
}};
constexpr std::array<Spelling<CublasMathMode>, 2> kMathModes{{
    {CublasMathMode::kPedantic, "pedantic"},
    {CublasMathMode::kDefaultTf32Off, "default_tf32_off"},
}};

template <class E, std::size_t N>
std::string_view name_of(const std::array<Spelling<E>, N>& table, E value) {
  return table[static_cast<std::size_t>(value)].name;
}

template <class E, std::size_t N>
std::optional<E> value_of(const std::array<Spelling<E>, N>& table, std::string_view name) {
  for (const auto& s : table)
    if (s.name == name) return s.value;
  return std::nullopt;
}

template <class E, std::size_t N>
constexpr std::array<E, N> values_of(const std::array<Spelling<E>, N>& table) {
  std::array<E, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = table[i].value;
  return out;
}

constexpr auto kJudgmentValues = values_of(kJudgments);
constexpr auto kOpClassValues = values_of(kOpClasses);
constexpr auto kDTypeValues = values_of(kDTypes);
constexpr auto kMetricValues = values_of(kMetrics);

constexpr std::array<std::string_view, 5> kRequiredTopLevel{
    "version", "policy", "comparison_roles", "judgments", "chain_logprob_aggregates"};
constexpr std::array<std::string_view, 2> kVersions{"ws1-c1-v2", "ws1-c1-v3"};

}  // namespace

std::span<const Judgment> all_judgments() { return kJudgmentValues; }
std::span<const OpClass> all_op_classes() { return kOpClassValues; }
std::span<const ContractDType> all_contract_dtypes() { return kDTypeValues; }
std::span<const ChainMetric> all_chain_metrics() { return kMetricValues; }

std::string_view contract_name(Judgment j) {
  // Chain parity has no table; the contract names it by its report kind.
  if (j == Judgment::kChainParity) return "train_infer_logprob_parity";
  return name_of(kJudgments, j);
}
std::string_view contract_name(OpClass c) { return name_of(kOpClasses, c); }
std::string_view contract_name(ContractDType t) { return name_of(kDTypes, t); }
std::string_view contract_name(RowStatus s) { return name_of(kStatuses, s); }
std::string_view contract_name(CompareMode m) { return name_of(kModes, m); }
std::string_view contract_name(ChainMetric m) { return name_of(kMetrics, m); }
std::string_view contract_name(RmsNormOrder o) { return name_of(kOrders, o); }
std::string_view contract_name(NanPolicy p) { return name_of(kNanPolicies, p); }
std::string_view contract_name(CublasMathMode m) { return name_of(kMathModes, m); }

std::optional<Judgment> judgment_from_name(std::string_view n) { return value_of(kJudgments, n); }
std::optional<OpClass> op_class_from_name(std::string_view n) { return value_of(kOpClasses, n); }
std::optional<ContractDType> contract_dtype_from_name(std::string_view n) {
  return value_of(kDTypes, n);
}
std::optional<RowStatus> row_status_from_name(std::string_view n) { return value_of(kStatuses, n); }
std::optional<CompareMode> compare_mode_from_name(std::string_view n) {
  return value_of(kModes, n);
}
std::optional<ChainMetric> chain_metric_from_name(std::string_view n) {
  return value_of(kMetrics, n);
}
std::optional<RmsNormOrder> rms_norm_order_from_name(std::string_view n) {
  return value_of(kOrders, n);
}
std::optional<NanPolicy> nan_policy_from_name(std::string_view n) {
  return value_of(kNanPolicies, n);
}
std::optional<CublasMathMode> cublas_math_mode_from_name(std::string_view n) {
  return value_of(kMathModes, n);
}

bool is_invariance(Judgment j) {
  return j == Judgment::kForwardInvariance || j == Judgment::kGradientInvariance;
}

std::optional<ContractDType> contract_dtype(DType t) {
  switch (t) {
    case DType::kF32:
      return ContractDType::kFloat32;
    case DType::kBF16:
      return ContractDType::kBFloat16;
    case DType::kF16:
      return ContractDType::kFloat16;
    default:
      return std::nullopt;
  }
}

std::optional<DType> to_dtype(ContractDType t) {
  switch (t) {
    case ContractDType::kFloat32:
      return DType::kF32;
    case ContractDType::kBFloat16:
      return DType::kBF16;
    case ContractDType::kFloat16:
      return DType::kF16;
    case ContractDType::kFloat8:
      return std::nullopt;
  }
  return std::nullopt;
}

// Spec §2.3's classes: the op catalogue's (ws1/op_catalogue.hpp), the one list of the ops.
std::span<const OpClassEntry> spec_op_classes() {
  static const std::vector<OpClassEntry> entries = [] {
    std::vector<OpClassEntry> v;
    for (const OpInfo& op : op_catalogue()) {
      const auto cls = op_class_from_name(op.op_class);
      if (!cls) throw std::logic_error("op catalogue: " + std::string(op.name) + " has no spec class");
      v.push_back({op.name, *cls});
    }
    return v;
  }();
  return entries;
}

std::optional<OpClass> spec_op_class(std::string_view op) {
  for (const auto& e : spec_op_classes())
    if (e.op == op) return e.op_class;
  return std::nullopt;
}

std::span<const std::string_view> contract_required_top_level_keys() { return kRequiredTopLevel; }
std::span<const std::string_view> contract_known_versions() { return kVersions; }

}  // namespace ws1
