#include "parity_sides.hpp"

namespace ws1::model_detail {
namespace {

constexpr std::string_view kTeacherForcing = "training_style_teacher_forcing";
constexpr std::string_view kRolloutDecode = "inference_style_rollout_decode";

}  // namespace

Result<Sides> contract_sides(const Contract& contract, const ParityRun& run) {
  const RolePair roles = contract.parity_roles();
  const std::string where = "comparison_roles.by_report_kind.train_infer_logprob_parity";
  const auto known = [](const std::string& r) { return r == kTeacherForcing || r == kRolloutDecode; };
  if (!known(roles.lhs) || !known(roles.rhs) || roles.lhs == roles.rhs)
    return bad_input(contract.file, where,
                     "roles '" + roles.lhs + "' and '" + roles.rhs + "': ws1check runs " +
                         std::string(kTeacherForcing) + " and " + std::string(kRolloutDecode));
  Sides s{roles.lhs, roles.rhs, {}, {}};
  const bool tf_left = roles.lhs == kTeacherForcing;
  for (const TokenLogp& t : run.tokens) {
    s.lhs.push_back(tf_left ? t.teacher_forcing : t.rollout_decode);
    s.rhs.push_back(tf_left ? t.rollout_decode : t.teacher_forcing);
  }
  return s;
}

}  // namespace ws1::model_detail
