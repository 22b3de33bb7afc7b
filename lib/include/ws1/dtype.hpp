// Element types ws1 handles, with their names in the three vocabularies it reads:
// safetensors ("BF16"), the contract ("bfloat16") and PyTorch ("torch.bfloat16").
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ws1 {

enum class DType { kBF16, kF16, kF32, kF64, kI32, kI64, kBool, kU8 };

std::size_t dtype_size(DType t);
bool dtype_is_float(DType t);
// "BF16", "F16", "F32", "F64", "I32", "I64", "BOOL", "U8" (safetensors spelling).
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
// "bfloat16", "float16", "float32", "float64", "int32", "int64", "bool", "uint8".
std::string_view dtype_contract_name(DType t);
std::optional<DType> dtype_from_contract_name(std::string_view name);

}  // namespace ws1
