// Pieces shared by the safetensors reader and writer (not public).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ws1/error.hpp"
#include "ws1/safetensors.hpp"

namespace ws1::safetensors_detail {

// The header length N from the first 8 bytes of a file of `file_size` bytes (`prefix` holds
// min(8, file_size) bytes): checks the size limit and that 8 + N fits in the file.
Result<std::uint64_t> header_length(std::span<const std::byte> prefix, std::uint64_t file_size,
                                    const std::string& file);

// Validates the N header bytes of a file of `file_size` bytes and builds its index.
Result<SafetensorsIndex> parse_header(std::span<const std::byte> header, std::uint64_t file_size,
                                      const std::string& file);

// BOOL tensors hold one byte per element, 0 or 1.
Status check_bool_bytes(std::span<const std::byte> bytes, const SafetensorsEntry& entry,
                        const std::string& file);

// A name as it may appear in a one-line message: control characters escaped, long names cut.
std::string printable(std::string_view name);

}  // namespace ws1::safetensors_detail
