// spec §9.2 Option B as a user's contract would declare it (the shipped contract declares
// Option A): FP32 leaves of 32, the mid split, bf16 merges and output. For tests that judge a
// contract declaring B as written.
#pragma once

#include <map>
#include <string>

#include "ws1/contract.hpp"

namespace ws1::test {

inline Contract with_option_b(Contract c) {
  AccumulationException b;
  b.leaf_accumulation_dtype = ContractDType::kFloat32;
  b.k_tree_leaf = 32;
  b.split = "mid = lo + (hi-lo)/2";
  b.merge_dtype = ContractDType::kBFloat16;
  b.output_dtype = ContractDType::kBFloat16;
  b.rationale = "test: spec §9.2 Option B";
  c.declarations.accumulation_exceptions = std::map<std::string, AccumulationException>{{"det_gemm", b}};
  return c;
}

}  // namespace ws1::test
