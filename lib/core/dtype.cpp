#include "ws1/dtype.hpp"

#include <array>

namespace ws1 {
namespace {

struct DTypeInfo {
  DType type;
  std::size_t size;
  bool is_float;
  std::string_view safetensors;
  std::string_view contract;
};

constexpr std::array<DTypeInfo, 8> kInfo{{
    {DType::kBF16, 2, true, "BF16", "bfloat16"},
    {DType::kF16, 2, true, "F16", "float16"},
    {DType::kF32, 4, true, "F32", "float32"},
    {DType::kF64, 8, true, "F64", "float64"},
    {DType::kI32, 4, false, "I32", "int32"},
    {DType::kI64, 8, false, "I64", "int64"},
    {DType::kBool, 1, false, "BOOL", "bool"},
    {DType::kU8, 1, false, "U8", "uint8"},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<std::size_t>(t)]; }

}  // namespace

std::size_t dtype_size(DType t) { return info(t).size; }
bool dtype_is_float(DType t) { return info(t).is_float; }
std::string_view dtype_safetensors_name(DType t) { return info(t).safetensors; }
std::string_view dtype_contract_name(DType t) { return info(t).contract; }

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.safetensors == name) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_contract_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.contract == name) return i.type;
  return std::nullopt;
}

}  // namespace ws1
