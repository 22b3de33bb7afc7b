// Internal: bf16 pairs packed in 32-bit words (lo in bits 0-15, hi in 16-31: memory order) for
// det_gemm's tensor-core variant (det_gemm_tc.cu) and its self-test (det_gemm_tc_selftest.cu).
// Included by .cu files only.
//
// Two formulations of det_gemm's leaf rounding and merge, bit-equal for every input:
//   * the definition, per element: round_bf16 (det_gemm_tree.cuh: RNE; a NaN keeps its sign
//     and top payload with the quiet bit set) of each FP32 value, and a merge
//     round_bf16(__fadd_rn(float(left), float(right)));
//   * the packed one, two elements per instruction: cvt.rn.bf16x2.f32 and add.rn.bf16x2, with
//     the definition re-run on a whole array of words when the hardware produced a NaN in any
//     of them (the hardware's NaN is canonical, the definition keeps payloads; rare).
//
// Why the packed results equal the definition's when no NaN comes out:
//   Leaf: cvt.rn.bf16x2.f32 rounds each FP32 value to nearest even, overflow to inf, without
//   flushing subnormals (it has no .ftz); round_bf16's integer carry is the same RNE on the bit
//   pattern (monotonic in the magnitude; a carry out of the mantissa bumps the exponent, up to
//   inf). A NaN input gives a NaN output, so NaNs always reach the fix-up.
//   Merge: add.rn.bf16x2 returns RNE_bf16(a + b) of the exact sum; the definition returns
//   RNE_bf16(RN_fp32(a + b)). They agree for bf16 a, b (not NaN): let |a| >= |b| > 0 with
//   exponents ea >= eb (subnormals: exponent -126) and d = ea - eb. a + b is an integer
//   multiple of 2^(eb-7) below 2^(ea+2) in magnitude, i.e. at most d + 9 significant bits.
//   - d <= 15: at most 24 bits, so the FP32 add is exact (or |a + b| >= 2^128, where both give
//     inf of the sum's sign); one rounding either way.
//   - d >= 16: |b| < 2^(eb+1) <= 2^(ea-15), while every bf16 rounding boundary (midpoint)
//     around a is at least 2^(ea-9) from a (half a bf16 ulp of the binade below a's). a is an
//     FP32 value and RN_fp32 is monotonic, so both a + b and RN_fp32(a + b) lie within
//     2^(ea-15) of a, strictly inside a's rounding interval: both round to a.
//   A zero operand: the sum is the other operand, exact. Signs of zero: x + (-x) = +0 and
//   -0 + -0 = -0 under round-to-nearest in FP32 and in bf16 alike. An infinite operand: that
//   inf in both, except inf + (-inf), which, like a NaN operand, gives NaN: the fix-up.
// det_gemm_tc_selftest.cu checks both claims on every input (2^32 floats, 2^32 bf16 pairs).
#pragma once

#include "det_gemm_tree.cuh"

namespace ws1cuda::bf16_pack {

// ---- The definition, per element ------------------------------------------------------------

__device__ __forceinline__ float low_of(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float high_of(unsigned w) { return __uint_as_float(w & 0xFFFF0000u); }

// round_bf16 of two values, packed.
__device__ __forceinline__ unsigned round_pack_definition(float lo, float hi) {
  return __byte_perm(__float_as_uint(round_bf16(lo)), __float_as_uint(round_bf16(hi)), 0x7632);
}

// A merge of each half: round_bf16(float(left) + float(right)), the FP32 add rounded to nearest.
__device__ __forceinline__ unsigned merge_definition(unsigned left, unsigned right) {
  return round_pack_definition(__fadd_rn(low_of(left), low_of(right)), __fadd_rn(high_of(left), high_of(right)));
}

// ---- Hardware instructions (canonical NaNs: not the definition on NaN) ------------------------

// RNE of two FP32 values to bf16, packed (cvt's first source goes to the high half).
__device__ __forceinline__ unsigned cvt_pack_rn(float lo, float hi) {
  unsigned w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}

// The correctly rounded (RNE) bf16 sum of each half. .rn: never fused with a multiply.
__device__ __forceinline__ unsigned add_rn_bf16x2(unsigned a, unsigned b) {
  unsigned w;
  asm("add.rn.bf16x2 %0, %1, %2;\n" : "=r"(w) : "r"(a), "r"(b));
  return w;
}

// Whether either half of w is a NaN: magnitude above inf's 0x7F80.
__device__ __forceinline__ bool has_nan(unsigned w) {
  return (((w & 0x7FFF7FFFu) + 0x007F007Fu) & 0x80008000u) != 0u;  // no carry between halves
}

// Whether any half of any word is a NaN: max.NaN keeps a NaN of either operand (one
// instruction per word), then one test of the two halves left.
template <int N>
__device__ __forceinline__ bool any_nan(const unsigned (&w)[N]) {
  unsigned m = w[0];
#pragma unroll
  for (int q = 1; q < N; ++q) asm("max.NaN.bf16x2 %0, %0, %1;\n" : "+r"(m) : "r"(w[q]));
  return has_nan(m);
}

// ---- The packed formulation (bit-equal to the definition, see the file comment) ----------------

// w[q] = round_pack_definition(x[2q], x[2q + 1]) for all q.
template <int N>
__device__ __forceinline__ void round_words(const float (&x)[2 * N], unsigned (&w)[N]) {
#pragma unroll
  for (int q = 0; q < N; ++q) w[q] = cvt_pack_rn(x[2 * q], x[2 * q + 1]);
  if (any_nan(w)) {  // rare: a NaN leaf; the definition keeps its payload
#pragma unroll
    for (int q = 0; q < N; ++q) w[q] = round_pack_definition(x[2 * q], x[2 * q + 1]);
  }
}

// v[q] = merge_definition(left[q], v[q]) for all q (left: the pending left subtree).
template <int N>
__device__ __forceinline__ void merge_words(const unsigned (&left)[N], unsigned (&v)[N]) {
  unsigned r[N];
#pragma unroll
  for (int q = 0; q < N; ++q) r[q] = add_rn_bf16x2(left[q], v[q]);
  if (any_nan(r)) {  // rare: a NaN operand or inf + (-inf); the definition's NaN rule
#pragma unroll
    for (int q = 0; q < N; ++q) r[q] = merge_definition(left[q], v[q]);
  }
#pragma unroll
  for (int q = 0; q < N; ++q) v[q] = r[q];
}

}  // namespace ws1cuda::bf16_pack
