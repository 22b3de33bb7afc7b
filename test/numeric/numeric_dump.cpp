// Exposes ws1's bf16/fp16 conversions and ULP distances to the numpy oracle
// (test/oracle/numeric_oracle.py). All files are raw little-endian arrays.
//   numeric_dump convert IN OUT      IN: n x u32 float32 bits
//                                    OUT: n x u16 to_bf16, then n x u16 to_fp16
//   numeric_dump decode OUT          OUT: 65536 x u32 from_bf16(i), then 65536 x u32 from_fp16(i)
//   numeric_dump ulp DTYPE IN OUT    DTYPE: BF16 | F16 | F32 | F64 (safetensors names)
//                                    IN: n x (u32 a, u32 b) float32 bits; OUT: n x u64 distance
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/numeric.hpp"

namespace {

template <class T>
bool read_array(const char* path, std::vector<T>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
  if (raw.size() % sizeof(T) != 0) return false;
  out.resize(raw.size() / sizeof(T));
  if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());
  return true;
}

template <class T>
bool write_array(std::ofstream& out, const std::vector<T>& v) {
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(T)));
  return static_cast<bool>(out);
}

int usage() {
  std::fputs("usage: numeric_dump convert IN OUT | decode OUT | ulp DTYPE IN OUT\n", stderr);
  return 2;
}

int fail(const char* path, const char* what) {
  std::fprintf(stderr, "numeric_dump: %s: %s\n", path, what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string_view mode = argv[1];
  if (mode == "convert" && argc == 4) {
    std::vector<std::uint32_t> in;
    if (!read_array(argv[2], in)) return fail(argv[2], "cannot read a u32 array");
    std::vector<std::uint16_t> b(in.size()), h(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      const float f = ws1::float_from_bits(in[i]);
      b[i] = ws1::to_bf16(f).bits;
      h[i] = ws1::to_fp16(f).bits;
    }
    std::ofstream out(argv[3], std::ios::binary);
    if (!write_array(out, b) || !write_array(out, h)) return fail(argv[3], "cannot write");
    return 0;
  }
  if (mode == "decode" && argc == 3) {
    std::vector<std::uint32_t> b(65536), h(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
      b[i] = ws1::float_bits(ws1::from_bf16(ws1::bf16{static_cast<std::uint16_t>(i)}));
      h[i] = ws1::float_bits(ws1::from_fp16(ws1::fp16{static_cast<std::uint16_t>(i)}));
    }
    std::ofstream out(argv[2], std::ios::binary);
    if (!write_array(out, b) || !write_array(out, h)) return fail(argv[2], "cannot write");
    return 0;
  }
  if (mode == "ulp" && argc == 5) {
    const auto t = ws1::dtype_from_safetensors_name(argv[2]);
    if (!t || !ws1::dtype_is_float(*t)) return fail(argv[2], "not a float dtype name");
    std::vector<std::uint32_t> in;
    if (!read_array(argv[3], in) || in.size() % 2 != 0)
      return fail(argv[3], "cannot read an array of u32 pairs");
    std::vector<std::uint64_t> d(in.size() / 2);
    for (std::size_t i = 0; i < d.size(); ++i)
      d[i] = ws1::ulp_distance(ws1::float_from_bits(in[2 * i]),
                               ws1::float_from_bits(in[2 * i + 1]), *t);
    std::ofstream out(argv[4], std::ios::binary);
    if (!write_array(out, d)) return fail(argv[4], "cannot write");
    return 0;
  }
  return usage();
}
