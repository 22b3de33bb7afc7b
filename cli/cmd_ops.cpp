// `ws1check ops`: the op catalogue.
#include <fmt/core.h>

#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "ws1/op_catalogue.hpp"

namespace ws1cli {

Command register_ops(CLI::App& app) {
  auto op = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("ops", "the op catalogue (DESIGN §6)");
  sub->add_option("--op", *op, "show one op");
  return {sub, [op] {
            if (!op->empty() && !ws1::find_op(*op)) {
              return report(ws1::bad_input("--op", *op, "unknown op (see `ws1check ops`)"));
            }
            fmt::print("{:<22} {:<12} {:<4} {}\n", "op", "class", "C8", "forward | backward");
            for (const auto& info : ws1::op_catalogue()) {
              if (!op->empty() && info.name != *op) continue;
              fmt::print("{:<22} {:<12} {:<4} {} | {}\n", info.name, info.op_class,
                         info.c8_required ? "yes" : "opt", info.forward, info.backward);
            }
            return 0;
          }};
}

}  // namespace ws1cli
