// Fuzz target: bytes of a workload manifest (fixtures/*.json, `--workload FILE`) through
// parse_manifest, the in-memory entry point under load_manifest. It reads and cross-checks every
// field, then recomputes the identity hash over the canonical JSON of the same bytes, so both
// the DOM walk and the canonical JSON writer see every input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ws1/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ws1::Result<ws1::Manifest> manifest = ws1::parse_manifest(text, "fuzz-manifest.json");
  if (!manifest) return 0;
  const ws1::Manifest& m = *manifest;
  (void)m.total_tokens();
  (void)m.active_tokens();
  for (const ws1::Sample& s : m.samples) (void)m.sample(s.sample_id);
  for (const ws1::RepresentativeCase& c : m.cases) (void)m.find_case(c.case_id);
  for (const ws1::WorkloadProfile& p : m.profiles) (void)m.profile(p.name);
  return 0;
}
