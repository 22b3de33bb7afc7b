// Reading and writing Hugging Face safetensors files: an 8-byte little-endian header length N,
// N bytes of JSON header ({"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}),
// then the tensors' little-endian, row-major bytes packed without holes.
//
// Reading validates at least as strictly as the reference implementation (header size limits,
// UTF-8 JSON object, no duplicate keys, exact entry fields, known dtype, overflow-checked sizes,
// offsets that tile the data section exactly, no trailing bytes). Every problem is one Error
// `file: where: problem`, where = "header length", "header", "<tensor>.<field>", "byte <n>"...
//
// Writing is canonical, like the reference writer: tensors ordered by dtype (I64, F64, F32, I32,
// BF16, F16, U8, BOOL: descending alignment) then by name (bytewise), header compact JSON with
// "__metadata__" first (keys sorted, left out when empty), padded with spaces to a multiple of
// 8 bytes. The same tensors and metadata therefore always give the same bytes, whatever order
// the caller passes them in. The file is written atomically (temporary file in the same
// directory, then rename): on failure nothing is left behind and an existing file is untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

// Largest header the reader accepts (the reference implementation's limit).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor as the header describes it; offsets are relative to the start of the data
// section (byte `data_start` of the file), [begin, end).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t nbytes() const { return end - begin; }
};

// The validated header of a file, without the tensor data.
struct SafetensorsIndex {
  std::string file;            // display name used in errors
  SafetensorsMetadata metadata;
  std::vector<SafetensorsEntry> entries;  // file order (by offset; ties by name)
  std::uint64_t header_bytes = 0;         // N
  std::uint64_t data_start = 0;           // 8 + N
  std::uint64_t file_size = 0;            // 8 + N + data bytes
  const SafetensorsEntry* find(std::string_view name) const;
};

// A whole file in memory.
struct SafetensorsFile {
  SafetensorsMetadata metadata;
  std::vector<NamedTensor> tensors;  // file order (by offset; ties by name)
  const Tensor* find(std::string_view name) const;
};

// Reads and validates the whole file; tensor bytes go straight into each tensor's storage.
Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path);
// The same from bytes in memory; `display_name` names the input in errors.
Result<SafetensorsFile> parse_safetensors(std::span<const std::byte> bytes,
                                          std::string_view display_name);

// Reads and validates only the header (the file size is checked against it): cheap on
// multi-GB weight shards.
Result<SafetensorsIndex> read_safetensors_header(const std::filesystem::path& path);
// Reads one tensor of a file described by `index` (seek + read). Fails when the name is not in
// the index or the file no longer has the size the index was made from.
Result<Tensor> read_safetensors_tensor(const std::filesystem::path& path,
                                       const SafetensorsIndex& index, std::string_view name);

// The canonical file bytes for these tensors (any layout; written row-major) and metadata.
// Names must be non-empty, unique, valid UTF-8 and not "__metadata__"; tensors must be defined.
Result<std::vector<std::byte>> serialize_safetensors(std::span<const NamedTensor> tensors,
                                                     const SafetensorsMetadata& metadata = {});
// Whether a written file must survive a crash of the machine: kDurable (evidence, fixtures the
// user keeps) flushes it to the device before it replaces the target; kTransient (the exec
// protocol's request files, read once by the other process and removed) skips that flush, which
// costs the disk's write bandwidth for every byte. Both are atomic for readers (rename).
enum class Durability { kDurable, kTransient };
// Writes the canonical file atomically (see above).
Status write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                         const SafetensorsMetadata& metadata = {},
                         Durability durability = Durability::kDurable);

}  // namespace ws1
