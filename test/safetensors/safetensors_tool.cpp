// Test driver for the numpy interop oracle (test/oracle/safetensors_interop.py):
//   safetensors_tool copy IN OUT   read IN whole, write it again (canonical layout) to OUT
//   safetensors_tool dump IN       header-only read, then each tensor by name; prints JSON:
//     {"metadata": {...}, "tensors": [{"name", "dtype", "shape", "data_offsets", "xxh3",
//      "sha256"}, ...]}   (tensors in file order; hashes over the tensor's bytes)
// Errors: one line on stderr, exit code of the error class (2 = bad input).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "ws1/hash.hpp"
#include "ws1/safetensors.hpp"

namespace {

int fail(const ws1::Error& e) {
  std::cerr << e.message() << "\n";
  return static_cast<int>(e.code);
}

int copy(const std::string& in, const std::string& out) {
  auto file = ws1::read_safetensors(in);
  if (!file) return fail(file.error());
  if (ws1::Status s = ws1::write_safetensors(out, file->tensors, file->metadata); !s)
    return fail(s.error());
  return 0;
}

int dump(const std::string& in) {
  auto index = ws1::read_safetensors_header(in);
  if (!index) return fail(index.error());
  nlohmann::ordered_json out;
  out["metadata"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : index->metadata) out["metadata"][k] = v;
  out["tensors"] = nlohmann::ordered_json::array();
  for (const ws1::SafetensorsEntry& e : index->entries) {
    auto t = ws1::read_safetensors_tensor(in, *index, e.name);
    if (!t) return fail(t.error());
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["dtype"] = std::string(ws1::dtype_safetensors_name(e.dtype));
    j["shape"] = e.shape;
    j["data_offsets"] = {e.begin, e.end};
    j["xxh3"] = ws1::xxh3_128_hex(t->bytes());
    j["sha256"] = ws1::sha256_hex(t->bytes());
    out["tensors"].push_back(std::move(j));
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "copy" && argc == 4) return copy(argv[2], argv[3]);
  if (cmd == "dump" && argc == 3) return dump(argv[2]);
  std::cerr << "usage: safetensors_tool copy IN OUT | dump IN\n";
  return 2;
}
