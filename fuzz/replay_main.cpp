// Replays a fuzz target's corpus without libFuzzer: every regular file under the directory
// given (recursively, in sorted order) is passed to LLVMFuzzerTestOneInput once. Exits 1 when
// the directory is missing or holds no file, so a test that reads nothing does not pass; a
// crash or sanitizer report of the target ends the process as it would under the fuzzer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Targets may define it (libFuzzer calls it once, before the first input).
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  const fs::path dir = argv[1];
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::fprintf(stderr, "replay: %s is not a directory\n", dir.c_str());
    return 1;
  }
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file()) files.push_back(it->path());
  if (ec) {
    std::fprintf(stderr, "replay: cannot list %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: %s holds no corpus file\n", dir.c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());
  std::size_t bytes = 0;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    bytes += data.size();
  }
  std::printf("replay: %zu inputs (%zu bytes) from %s, no crash\n", files.size(), bytes, dir.c_str());
  return 0;
}
