// Shared helpers of the judge tests: the contract (the only source of tolerances), tensor
// builders, and an exact oracle for the accuracy bound written independently of the judge
// (fixed-point integers wide enough for any float, instead of floating-point expansions).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "ws1/judge.hpp"

namespace judge_test {

// contracts/ws1-c1-v2.json, loaded once (REQUIREs success).
const ws1::Contract& contract();
// The contract row's tolerance (REQUIREs that it has one).
ws1::Tolerance tolerance(ws1::Judgment j, ws1::OpClass c, ws1::ContractDType t);

// Contiguous tensors from values; bf16()/fp16() REQUIRE each value to be exact in the dtype.
ws1::Tensor f32(ws1::Shape shape, const std::vector<float>& values);
ws1::Tensor bf16(ws1::Shape shape, const std::vector<float>& values);
ws1::Tensor from_bits16(ws1::DType t, ws1::Shape shape, const std::vector<std::uint16_t>& bits);
ws1::Tensor from_bits32(ws1::Shape shape, const std::vector<std::uint32_t>& bits);
float value_at(const ws1::Tensor& t, std::int64_t flat);  // of a contiguous f32 tensor

// |c - r| <= atol + rtol * |r| in exact rational arithmetic (finite inputs).
bool exact_within(float c, float r, double atol, double rtol);

// Values of a float dtype (bf16 or f32) in order: ord is monotone in the value, +0 and -0
// share 0; from_ord inverts it.
std::int64_t ord(float x, ws1::DType t);
float from_ord(std::int64_t o, ws1::DType t);

}  // namespace judge_test
