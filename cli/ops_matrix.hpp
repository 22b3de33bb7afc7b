// The matrix of cells a workload gives, with N/A reasons (`ws1check ops --matrix`).
#pragma once

#include <string>

namespace ws1cli {

// Prints the cells of every op (or of `op_filter`); returns the exit code.
int print_matrix(const std::string& workload, const std::string& op_filter);

}  // namespace ws1cli
