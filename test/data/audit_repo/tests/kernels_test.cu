// Planted: a CUDA unit test with hard-coded tolerances.
#include <gtest/gtest.h>

const float kRtol = 2e-2f;  // "atol = 2" in a comment is not counted
struct Tol { float atol, rtol; };

TEST(Kernels, Near) {
  Tol tol;
  tol.atol = 1e-3f;
  EXPECT_NEAR(a, b, 1e-3);
  const char* s = "atol = 1";
  if (tol.atol == 0.0f) return;
  /* tol.rtol = 0.5; */
}
