// Parsers for the text files the host readback reads; separate so tests can feed them text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ws1::evidence_detail {

// PRETTY_NAME from os-release(5) text (shell-style assignment, value optionally quoted).
std::optional<std::string> os_release_pretty_name(std::string_view text);

// The CPU model from /proc/cpuinfo text: "model name" (x86), else "Model"/"Hardware"/
// "cpu model"/"Processor" (ARM, others).
std::optional<std::string> cpuinfo_model(std::string_view text);

// HEAD's object name from `git rev-parse HEAD` output: 40 or 64 lowercase hex digits plus a
// newline; anything else is rejected.
std::optional<std::string> git_commit_from_output(std::string_view out);

}  // namespace ws1::evidence_detail
