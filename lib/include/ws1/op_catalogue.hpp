// The op catalogue of DESIGN §6: the 13 ops ws1check judges, their spec §2.3 class, and
// whether upstream's C8 matrix requires them.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace ws1 {

struct OpInfo {
  std::string_view name;
  std::string_view op_class;  // spec §2.3: elementwise, reduction, attention, logprob
  bool c8_required;           // one of the 12 C8 rows (linear_logp is the optional 13th)
  std::string_view forward;   // one-line definition
  std::string_view backward;  // gradients produced
};

std::span<const OpInfo> op_catalogue();  // in C8 order, linear_logp last
std::optional<OpInfo> find_op(std::string_view name);

}  // namespace ws1
