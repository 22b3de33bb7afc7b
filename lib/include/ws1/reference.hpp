// Where an accuracy cell's FP32 reference is computed (spec §3.1, DESIGN §3.2). The CPU engine
// runs every op's reference of lib/ref (ws1/ref.hpp). A device engine (cuda_fp32,
// cuda/reference) computes the ops it takes on the GPU — FP32 arithmetic, GEMMs through cuBLAS
// FP32 with pedantic math, TF32 off — and hands the others to the CPU engine. Every accuracy cell
// records which engine produced its reference (evidence cell.reference), and the gold-dtype
// check applies to either (a reference that is not float32 is an error, never a verdict).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ws1/error.hpp"
#include "ws1/evidence.hpp"  // ReferenceProvenance
#include "ws1/op.hpp"

namespace ws1 {

struct ReferenceResult {
  Tensors tensors;
  ReferenceProvenance provenance;
};

class ReferenceEngine {
 public:
  virtual ~ReferenceEngine() = default;
  virtual std::string name() const = 0;  // "cpu_fp32", "cuda_fp32"
  virtual Result<ReferenceResult> forward(const Op& op, const Tensors& in, const OpContext& ctx) = 0;
  virtual Result<ReferenceResult> backward(const Op& op, const Tensors& in, const OpContext& ctx) = 0;
};

// Every op's lib/ref reference on the CPU.
std::unique_ptr<ReferenceEngine> make_cpu_reference();

}  // namespace ws1
