#include "evidence_test_support.hpp"

#include <algorithm>
#include <vector>

namespace ws1::test {

Evidence sample_evidence() {
  Evidence e;
  e.tool = tool_info();
  e.checkout = Checkout{std::string(40, 'a'), true};
  e.command = {"ws1check", "gate", "--out", "dir with space", "--json"};
  e.started = "2026-11-30T12:00:00.000Z";
  e.finished = "2026-11-30T12:05:00.250Z";
  e.contract = {"contracts/ws1-c1-v2.json", "ws1-c1-v2", std::string(64, 'c')};
  e.workload = {"fixtures/ws1_manifest.json", "ws1-qwen3-8b-dense-primary-v6", "ws1-c2-v8",
                std::string(64, 'd')};
  e.environment = read_environment();
  e.environment.gpu = GpuEnvironment{"NVIDIA H200", "9.0", 132, 150'000'000'000LL, 62'914'560,
                                     "13.0", "13.0", "13.1.0", "CUBLAS_PEDANTIC_MATH", false};
  e.environment.backend = "cuda_bf16";

  Cell green;
  green.id = "rms_norm/forward_accuracy/short/none/cuda_bf16";
  green.op = "rms_norm";
  green.op_class = "reduction";
  green.judgment = Judgment::kForwardAccuracy;
  green.tier = "short";
  green.transform = "none";
  green.backend = {"cuda_bf16", "cuda_bf16"};
  green.kernel_id = "ws1cuda.rms_norm.fwd.v1";
  green.fixture = FixtureRef{"rms_norm-short", "99aa06d3014798d86001c324468d497f",
                             18446744073709551615ULL,
                             {{"x", DType::kBF16, {4, 27, 4096}}, {"w", DType::kBF16, {4096}}}};
  green.dtypes = {DType::kBF16, DType::kF32};
  green.readback = {false, std::string("CUBLAS_PEDANTIC_MATH"), std::string(kAutocastNotApplicable)};
  green.reference = ws1::ReferenceProvenance{"cuda_fp32 (cublasSgemm on bf16 operands widened to FP32)",
                                             std::string("CUBLAS_PEDANTIC_MATH")};
  green.threshold = CellThreshold{ThresholdMode::kTolerance, 0.05, 0.02,
                              "judgments.forward_accuracy.by_op_class.reduction.bfloat16"};
  green.verdict = Verdict::kGreen;
  AccuracyTensor acc;
  acc.name = "y";
  acc.shape = {4, 27, 4096};
  acc.dtype = DType::kBF16;
  acc.numel = 4 * 27 * 4096;
  acc.violations = 0;
  acc.abs_error = {std::numeric_limits<double>::denorm_min(), 0.1, 1.0 / 3.0, -0.0};
  acc.rel_error = {std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                   2.2250738585072009e-308, 1e23};
  acc.ulp_distance = {1.0, 0.5, 0.0, 0.30000000000000004};
  // |c - r| / allowed = 0.00390625 / 0.070078125, in double.
  acc.worst = WorstElement{{3, 26, 4095}, 1.0078125, 1.00390625, 0.07007812500000001,
                           0.05574136008918617, false};
  acc.reference_max_abs = 7.25;
  acc.zeros_pass = false;
  acc.bias_ulp = -0.125;
  green.accuracy.push_back(acc);
  green.timing = {{"fixture", 0.25}, {"reference", 1.5}, {"candidate", 0.125}, {"judge", 0.0625}};

  Cell red;
  red.id = "det_gemm/gradient_invariance/primary/tp2/cuda_bf16";
  red.op = "det_gemm";
  red.op_class = "reduction";
  red.judgment = Judgment::kGradientInvariance;
  red.tier = "primary";
  red.transform = "tp2";
  red.backend = {"cuda_bf16", "cuda_bf16"};
  red.kernel_id = "ws1cuda.det_gemm.bwd.v1";
  red.fixture = FixtureRef{"det_gemm-primary", "06b05ab6733a618578af5f94892f3950", 20260812,
                           {{"a", DType::kBF16, {27, 4096}}, {"ids", DType::kI64, {27}}}};
  red.dtypes = {DType::kBF16, DType::kBF16};
  red.readback = {false, std::string("CUBLAS_PEDANTIC_MATH"), std::string(kAutocastNotApplicable)};
  red.threshold = CellThreshold{ThresholdMode::kBitwise, 0.0, 0.0,
                            "judgments.gradient_invariance.by_op_class.reduction.bfloat16"};
  red.verdict = Verdict::kRed;
  red.reason = "2 of 110592 elements differ in their bits";
  BitwiseTensor bw;
  bw.name = "dA";
  bw.lhs_shape = bw.rhs_shape = {27, 4096};
  bw.lhs_dtype = bw.rhs_dtype = DType::kBF16;
  bw.equal_bits = false;
  bw.mismatches = 2;
  bw.first_mismatches = {
      BitMismatch{{0, 7}, 0x0000, 0x8000, 0.0, -0.0},
      BitMismatch{{26, 4095}, 0x7fc1, 0x7f80, std::numeric_limits<double>::quiet_NaN(),
                  std::numeric_limits<double>::infinity()}};
  bw.lhs_nans = 1;
  bw.signed_zero_mismatches = 1;
  bw.notes = {"nan_policy fail: NaN in lhs at [26, 4095]"};
  red.bitwise.push_back(bw);
  BitwiseTensor bw32 = bw;
  bw32.name = "dB";
  bw32.lhs_dtype = bw32.rhs_dtype = DType::kF32;
  bw32.first_mismatches = {BitMismatch{{1, 2}, 0x3f800000, 0xbf800000, 1.0, -1.0},
                           BitMismatch{{3, 4}, 0xff800000, 0x00000001,
                                       -std::numeric_limits<double>::infinity(), 1.4e-45}};
  bw32.notes.clear();
  bw32.lhs_nans = 0;
  bw32.signed_zero_mismatches = 0;
  red.bitwise.push_back(bw32);

  Cell na;
  na.id = "pack/forward_accuracy/short/none/cuda_bf16";
  na.op = "pack";
  na.op_class = "elementwise";
  na.judgment = Judgment::kForwardAccuracy;
  na.tier = "short";
  na.transform = "none";
  na.backend = {"cuda_bf16", "cuda_bf16"};
  na.verdict = Verdict::kNa;
  na.reason = "pack is a pure data movement: N/A per C2/C4";

  Cell chain;
  chain.id = "chain/chain_parity/primary/none/cuda_bf16";
  chain.op = "qwen3_chain";
  chain.op_class = "logprob";
  chain.judgment = Judgment::kChainParity;
  chain.tier = "primary";
  chain.transform = "teacher_forcing_vs_decode";
  chain.backend = {"cuda_bf16", "cuda_bf16"};
  chain.kernel_id = "ws1cuda.chain.v1";
  chain.fixture = FixtureRef{"s0..s3", "00112233445566778899aabbccddeeff", 20260812, {}};
  chain.dtypes = {DType::kF32, DType::kF32};
  chain.threshold = CellThreshold{ThresholdMode::kMetric, std::nullopt, std::nullopt,
                              "chain_logprob_aggregates.metrics"};
  chain.verdict = Verdict::kGreen;
  chain.metrics = {
      MetricResult{"max_abs_dlogp", 0.0123, 0.06,
                   "chain_logprob_aggregates.metrics.max_abs_dlogp.by_execution_dtype.bfloat16.threshold"},
      MetricResult{"p999_abs_dlogp", 0.011, std::nullopt, ""}};

  e.cells = {green, red, na, chain};
  return e;
}

double read_float(simdjson::dom::element e) {
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) {
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    FAIL("unexpected string for a float: " << s);
  }
  double d = 0;
  REQUIRE(e.get_double().get(d) == simdjson::SUCCESS);
  return d;
}

std::vector<std::string> dir_entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ws1::test
