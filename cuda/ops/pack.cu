// pack on cuda_bf16 (lib/ops/pack.cpp states the definition): varlen packing, no arithmetic.
//   (x [B, S, *tail] bf16, mask [B, S] bool) -> packed [A, *tail], cu_seqlens [B+1] int64
// (x [T, *tail] with mask [T] is one sequence). The mask is validated and scanned on the host
// (pack_inputs: bytes 0/1, the active rows in row-major (b, s) order, cu_seqlens), which also
// fixes A, the output's shape, before anything is launched; cu_seqlens is that host scan.
//
// Forward: gather_rows_kernel (elementwise.cuh): packed row k = x row active[k].
// Backward: gather_rows_kernel the other way round: dx row r = dy.packed row k where
// active[k] = r, +0 where row r is inactive (a map entry -1), so every dx element is written
// once, coalesced, with no separate zero fill.
// Both are bf16 bit copies, one 16-byte vector per thread where the row width is a multiple
// of 8: bit-equal to cpu_bf16.
#include "elementwise.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

namespace ew = elementwise;

constexpr std::string_view kOp = "pack";

ws1::Tensor i64_tensor(const std::vector<std::int64_t>& v) {
  ws1::Tensor t(ws1::DType::kI64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::PackInputs r = ws1::ops::pack_inputs(kOp, in, false);
    const ws1::ops::Packing& p = r.packing;
    const auto rows = static_cast<std::int64_t>(p.active.size());
    const DeviceArray<bf16> x = upload_bf16(*r.x);
    const DeviceArray<std::int64_t> map = ew::upload_vector(p.active);
    auto packed = poisoned<bf16>(static_cast<std::size_t>(rows * p.width));
    launch_region("pack.fwd", [&] { ew::gather_rows(packed.get(), x.get(), map.get(), rows, p.width); });
    return ws1::Tensors{{"packed", download_bf16(packed, p.packed_shape)},
                        {"cu_seqlens", i64_tensor(p.cu_seqlens)}};
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::PackInputs r = ws1::ops::pack_inputs(kOp, in, true);
    const ws1::ops::Packing& p = r.packing;
    std::vector<std::int64_t> from(static_cast<std::size_t>(p.rows), -1);  // -1: inactive, +0
    for (std::size_t k = 0; k < p.active.size(); ++k)
      from[static_cast<std::size_t>(p.active[k])] = static_cast<std::int64_t>(k);
    const DeviceArray<bf16> dy = upload_bf16(*r.dy);
    const DeviceArray<std::int64_t> map = ew::upload_vector(from);
    auto dx = poisoned<bf16>(static_cast<std::size_t>(p.rows * p.width));
    launch_region("pack.bwd", [&] { ew::gather_rows(dx.get(), dy.get(), map.get(), p.rows, p.width); });
    return ws1::Tensors{{"dx", download_bf16(dx, r.x->shape())}};
  });
}

}  // namespace

const CudaOp& pack_cuda() {
  static const CudaOp op{kOp, forward, backward, ew::kGatherRowsKernel, ew::kGatherRowsKernel};
  return op;
}

}  // namespace ws1cuda
