// Subcommand registration. Each register_* adds one subcommand to the app and returns the
// action to run when that subcommand was the one parsed; the action returns the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ws1cli {

using Action = std::function<int()>;

struct Command {
  CLI::App* app;
  Action action;
};

Command register_env(CLI::App& app);
Command register_fixtures(CLI::App& app);
Command register_ops(CLI::App& app);
Command register_accuracy(CLI::App& app);
Command register_invariance(CLI::App& app);
Command register_gate(CLI::App& app);
Command register_audit(CLI::App& app);
Command register_worker(CLI::App& app);
Command register_bench(CLI::App& app);
Command register_parity(CLI::App& app);

}  // namespace ws1cli
