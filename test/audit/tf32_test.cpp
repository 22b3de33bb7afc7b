// The TF32 row: TF32 MMA opcodes in SASS (HMMA/HGMMA with .TF32; BF16/FP16 MMAs are not), a
// planted listing with TF32 instructions among others, cuobjdump run as a process (a stand-in
// script here: this machine has no CUDA toolkit), and the row's status from each observation:
// never conformant when something could not be checked.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "test_paths.hpp"
#include "ws1/audit.hpp"

using namespace ws1;
namespace fs = std::filesystem;

namespace {

// A cuobjdump -sass listing of an sm_90 module: one kernel with BF16 MMAs only, one with a
// TF32 mma.sync (HMMA.1688) and a TF32 wgmma (HGMMA ... .TF32).
constexpr std::string_view kListing = R"SASS(
Fatbin elf code:
================
arch = sm_90
code version = [1,8]
host = linux
compile_size = 64bit

	code for sm_90
		Function : _Z9bf16_gemmPK13__nv_bfloat16S1_Pf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
                                                                                /* 0x000fe40000000800 */
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;        /* 0x0000000c0804723c */
                                                                                /* 0x000fde0000041804 */
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ; /* 0x... */
        /*0030*/                   EXIT ;                                       /* 0x000000000000794d */
		..........

		Function : _Z9tf32_gemmPKfS0_Pf
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/               @P0 HMMA.1688.F32.TF32 R4, R8, R12, R4 ;         /* 0x0000000c0804723c */
        /*0020*/                   HGMMA.64x64x8.F32.TF32 R24, gdesc[UR4], RZ, !UPT ; /* 0x... */
        /*0030*/                   EXIT ;                                       /* 0x000000000000794d */
)SASS";

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ws1check-audit-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// An executable script standing in for cuobjdump: prints `listing` when called as -sass FILE.
fs::path fake_cuobjdump(const fs::path& dir, std::string_view listing, int exit_code = 0) {
  const fs::path listing_file = dir / "listing.txt";
  std::ofstream(listing_file) << listing;
  const fs::path script = dir / "cuobjdump";
  std::ofstream(script) << "#!/bin/sh\n"
                        << "[ \"$1\" = -sass ] || { echo \"usage\" >&2; exit 9; }\n"
                        << "[ -e \"$2\" ] || { echo \"cuobjdump fatal   : Could not open input file '$2'\" >&2; exit 1; }\n"
                        << "cat '" << listing_file.string() << "'\n"
                        << "exit " << exit_code << "\n";
  ::chmod(script.c_str(), 0755);
  return script;
}

Contract shipped_contract() {
  auto c = load_contract(test::source_root() / "contracts" / "ws1-c1-v2.json");
  REQUIRE(c.ok());
  return std::move(c).value();
}

GpuEnvironment h200(std::string mode, bool tf32) {
  GpuEnvironment g;
  g.name = "NVIDIA H200";
  g.cublas_math_mode = std::move(mode);
  g.tf32_enabled = tf32;
  return g;
}

SassScan clean_scan() {
  SassScan s;
  s.ran = true;
  s.tool = "cuobjdump";
  s.binary = "ws1check";
  s.listing = scan_sass_listing(kListing.substr(0, kListing.find("Function : _Z9tf32")));
  return s;
}

}  // namespace

TEST_CASE("tf32: TF32 MMA opcodes", "[audit][tf32]") {
  CHECK(is_tf32_mma("HMMA.1684.F32.TF32"));
  CHECK(is_tf32_mma("HMMA.1688.F32.TF32"));
  CHECK(is_tf32_mma("HGMMA.64x64x8.F32.TF32"));
  CHECK(is_tf32_mma("hgmma.64x8x8.f32.tf32"));
  CHECK_FALSE(is_tf32_mma("HMMA.16816.F32.BF16"));
  CHECK_FALSE(is_tf32_mma("HMMA.16816.F32"));
  CHECK_FALSE(is_tf32_mma("HGMMA.64x128x16.F32.BF16"));
  CHECK_FALSE(is_tf32_mma("FFMA"));
  CHECK_FALSE(is_tf32_mma("MOV.TF32"));  // not an MMA
  CHECK_FALSE(is_tf32_mma("HMMA"));
}

TEST_CASE("tf32: a planted SASS listing with TF32 instructions", "[audit][tf32][planted]") {
  const SassListingScan s = scan_sass_listing(kListing);
  CHECK(s.functions == 2);
  CHECK(s.instructions == 8);  // encoding-only lines are not instructions
  REQUIRE(s.tf32.size() == 2);
  CHECK(s.tf32[0].function == "_Z9tf32_gemmPKfS0_Pf");
  CHECK(s.tf32[0].arch == "sm_90");
  CHECK(s.tf32[0].instruction == "@P0 HMMA.1688.F32.TF32 R4, R8, R12, R4");
  CHECK(s.tf32[1].instruction.rfind("HGMMA.64x64x8.F32.TF32", 0) == 0);
  CHECK(s.tf32[0].line == 23);
  // The first kernel alone (BF16 MMAs only) has none.
  CHECK(clean_scan().listing.tf32.empty());
  CHECK(clean_scan().listing.functions == 1);
}

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("tf32: real cuobjdump listings from the H200 machine", "[audit][tf32][planted]") {
  // test/data/sass/planted_mma.cu compiled for sm_90a: TF32 wmma (HMMA.1684.F32.TF32 x4), BF16
  // wmma (HMMA.16816.F32.BF16 x2, not TF32), TF32 wgmma (HGMMA.64x8x8.F32.TF32).
  const SassListingScan s = scan_sass_listing(read_file(test::test_data() / "sass" / "planted_mma.sm_90a.sass"));
  CHECK(s.functions == 3);
  REQUIRE(s.tf32.size() == 5);
  CHECK(s.tf32[0].function == "_Z10tf32_wgmmayyPf");
  CHECK(s.tf32[0].instruction == "HGMMA.64x8x8.F32.TF32 R24, gdesc[UR4], RZ, !UPT, gsb0");
  CHECK(s.tf32[0].arch == "sm_90a");
  CHECK(s.tf32[0].line == 26);
  for (std::size_t i = 1; i < 5; ++i) {
    CHECK(s.tf32[i].function == "_Z9tf32_wmmaPKfS0_Pf");
    CHECK(s.tf32[i].instruction.rfind("HMMA.1684.F32.TF32 ", 0) == 0);
  }
  for (const auto& h : s.tf32) CHECK(h.function != "_Z9bf16_wmmaPK13__nv_bfloat16S1_Pf");
  // ws1check built with CUDA (libws1cuda: device queries and the cuBLAS readback, no kernel of
  // its own yet): modules without a device function, so nothing can be scanned.
  const SassListingScan w = scan_sass_listing(read_file(test::test_data() / "sass" / "ws1check-no-kernels.sm_90.sass"));
  CHECK(w.functions == 0);
  CHECK(w.instructions == 0);
  Tf32Observation o{true, h200("CUBLAS_PEDANTIC_MATH", false), "", clean_scan()};
  o.sass.listing = w;
  const AuditRow r = audit_tf32(shipped_contract(), o);
  CHECK(r.status == AuditStatus::kNotChecked);
  o.sass.listing = s;
  CHECK(audit_tf32(shipped_contract(), o).status == AuditStatus::kNonConformant);
}

TEST_CASE("tf32: cuobjdump runs as a process and its listing is scanned", "[audit][tf32]") {
  const fs::path dir = temp_dir("sass");
  const fs::path tool = fake_cuobjdump(dir, kListing);
  const fs::path binary = dir / "listing.txt";  // any existing file
  const SassScan s = scan_binary_sass(tool, binary);
  INFO(s.not_run);
  REQUIRE(s.ran);
  CHECK(s.listing.tf32.size() == 2);
  CHECK(s.tool == tool.string());
  // A failing cuobjdump: not run, with its message.
  const SassScan missing = scan_binary_sass(tool, dir / "no-such-binary");
  CHECK_FALSE(missing.ran);
  CHECK(missing.not_run.find("exited 1") != std::string::npos);
  CHECK(missing.not_run.find("Could not open input file") != std::string::npos);
  // No cuobjdump at all.
  const SassScan none = scan_binary_sass(std::nullopt, binary);
  CHECK_FALSE(none.ran);
  CHECK(none.not_run.find("cuobjdump not found") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("tf32 row: the status follows what was observed", "[audit][tf32]") {
  const Contract c = shipped_contract();
  SECTION("built without CUDA: not checked, never conformant") {
    Tf32Observation o;
    const AuditRow r = audit_tf32(c, o);
    CHECK(r.status == AuditStatus::kNotChecked);
    CHECK(r.basis.find("built without CUDA") != std::string::npos);
  }
  SECTION("pedantic math mode read back and clean SASS: conformant") {
    Tf32Observation o{true, h200("CUBLAS_PEDANTIC_MATH", false), "", clean_scan()};
    const AuditRow r = audit_tf32(c, o);
    INFO(r.basis);
    CHECK(r.status == AuditStatus::kConformant);
    CHECK(r.basis.find("CUBLAS_PEDANTIC_MATH") != std::string::npos);
    CHECK(r.basis.find("no TF32 MMA") != std::string::npos);
  }
  SECTION("planted: a TF32 MMA in the shipped SASS is non-conformant") {
    SassScan s = clean_scan();
    s.listing = scan_sass_listing(kListing);
    Tf32Observation o{true, h200("CUBLAS_PEDANTIC_MATH", false), "", s};
    const AuditRow r = audit_tf32(c, o);
    CHECK(r.status == AuditStatus::kNonConformant);
    CHECK(r.basis.find("HMMA.1688.F32.TF32") != std::string::npos);
    CHECK(r.basis.find("_Z9tf32_gemmPKfS0_Pf") != std::string::npos);
  }
  SECTION("planted: TF32 math mode read back is non-conformant") {
    Tf32Observation o{true, h200("CUBLAS_TF32_TENSOR_OP_MATH", true), "", clean_scan()};
    CHECK(audit_tf32(c, o).status == AuditStatus::kNonConformant);
    Tf32Observation d{true, h200("CUBLAS_DEFAULT_MATH", false), "", clean_scan()};
    CHECK(audit_tf32(c, d).status == AuditStatus::kNonConformant);  // declared pedantic
  }
  SECTION("no GPU, no cuobjdump, or a listing without kernels: not checked") {
    Tf32Observation no_gpu{true, std::nullopt, "no CUDA device: cudaErrorNoDevice", clean_scan()};
    const AuditRow a = audit_tf32(c, no_gpu);
    CHECK(a.status == AuditStatus::kNotChecked);
    CHECK(a.basis.find("cudaErrorNoDevice") != std::string::npos);
    SassScan none;
    none.not_run = "cuobjdump not found (PATH, /usr/local/cuda/bin)";
    Tf32Observation no_tool{true, h200("CUBLAS_PEDANTIC_MATH", false), "", none};
    CHECK(audit_tf32(c, no_tool).status == AuditStatus::kNotChecked);
    SassScan empty = clean_scan();
    empty.listing = scan_sass_listing("\nFatbin ptx code:\n");
    Tf32Observation no_kernels{true, h200("CUBLAS_PEDANTIC_MATH", false), "", empty};
    const AuditRow k = audit_tf32(c, no_kernels);
    CHECK(k.status == AuditStatus::kNotChecked);
    CHECK(k.basis.find("no device function") != std::string::npos);
  }
  SECTION("a contract with TF32 enabled is non-conformant whatever runs") {
    Contract e = c;
    e.policy.tf32_candidate_execution = "enabled";
    Tf32Observation o{true, h200("CUBLAS_PEDANTIC_MATH", false), "", clean_scan()};
    CHECK(audit_tf32(e, o).status == AuditStatus::kNonConformant);
  }
}
