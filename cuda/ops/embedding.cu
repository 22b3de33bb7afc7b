// embedding on cuda_bf16 (lib/ops/embedding.cpp states the definition): y[t, :] = table[ids[t], :].
// ids are validated on the host (every one in [0, V), embedding_inputs) before anything runs.
//
// Forward: gather_rows_kernel (elementwise.cuh), a bf16 bit copy of the selected rows, one
// 16-byte vector per thread where H % 8 == 0. Exact, bit-equal to cpu_bf16.
//
// Backward: dtable [V, H] bf16, +0 in rows no id selects; row v = the FP32 sum of the dy rows of
// the tokens with id v, added left to right in increasing token index from +0, rounded to bf16
// once — the CPU candidate's order exactly, so bit-equal to cpu_bf16. Three steps:
//   1. cudaMemsetAsync: dtable = +0.
//   2. cub::DeviceRadixSort::SortPairs of (id, token index) on the id bits only: the sort is
//      stable, so equal ids keep increasing token order (the CPU's std::stable_sort order).
//   3. embedding_dtable_kernel: grid (sorted position, column tile); the block at the first
//      position of an id's run owns that id's row (the others return at once), each thread
//      8 columns (16-byte loads), summing the run's dy rows in sorted order, 8 rows' loads in
//      flight. No atomics: each dtable element is written by one thread, so the bits do not
//      depend on the grid, and a call with the same tokens gives the same bits.
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <climits>
#include <numeric>

#include "elementwise.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

namespace ew = elementwise;

constexpr std::string_view kOp = "embedding";
constexpr std::string_view kDtableKernel = "embedding_dtable_kernel";
constexpr int kDtableThreads = 128;
constexpr int kRowsInFlight = 8;  // dy loads issued before their in-order adds

// acc[j] += dy[tokens[k] * hidden + c + j] for k = first .. last-1, in that order.
template <int V>
__device__ __forceinline__ void sum_rows(float (&acc)[V], const __nv_bfloat16* dy,
                                         const std::int64_t* tokens, std::int64_t first,
                                         std::int64_t last, std::int64_t hidden, std::int64_t c) {
  std::int64_t k = first;
  for (; k + kRowsInFlight <= last; k += kRowsInFlight) {
    float r[kRowsInFlight][V];
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u) ew::load_bf16<V>(dy + tokens[k + u] * hidden + c, r[u]);
#pragma unroll
    for (int u = 0; u < kRowsInFlight; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = __fadd_rn(acc[j], r[u][j]);
  }
  for (; k < last; ++k) {
    float r[V];
    ew::load_bf16<V>(dy + tokens[k] * hidden + c, r);
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = __fadd_rn(acc[j], r[j]);
  }
}

// ids/tokens: the n (id, token index) pairs sorted by id, stable. V = 8 needs H % 8 == 0.
template <int V>
__global__ void __launch_bounds__(kDtableThreads)
    embedding_dtable_kernel(__nv_bfloat16* dtable, const __nv_bfloat16* dy,
                            const std::uint64_t* ids, const std::int64_t* tokens, std::int64_t n,
                            std::int64_t hidden) {
  for (std::int64_t first = blockIdx.x; first < n; first += gridDim.x) {
    const std::uint64_t id = ids[first];
    if (first > 0 && ids[first - 1] == id) continue;  // not where id's run starts
    std::int64_t last = first + 1;
    while (last < n && ids[last] == id) ++last;
    const std::int64_t step = std::int64_t{gridDim.y} * blockDim.x * V;
    for (std::int64_t c = (std::int64_t{blockIdx.y} * blockDim.x + threadIdx.x) * V; c < hidden;
         c += step) {
      float acc[V];
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = 0.0f;
      sum_rows<V>(acc, dy, tokens, first, last, hidden, c);
      ew::store_bf16<V>(dtable + static_cast<std::int64_t>(id) * hidden + c, acc);
    }
  }
}

template <int V>
void launch_dtable(__nv_bfloat16* dtable, const __nv_bfloat16* dy, const std::uint64_t* ids,
                   const std::int64_t* tokens, std::int64_t n, std::int64_t hidden) {
  const std::int64_t tiles = (hidden + std::int64_t{kDtableThreads} * V - 1) / (std::int64_t{kDtableThreads} * V);
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(n, INT_MAX)),
                  static_cast<unsigned>(std::min<std::int64_t>(tiles, 65535)));
  embedding_dtable_kernel<V><<<grid, kDtableThreads>>>(dtable, dy, ids, tokens, n, hidden);
}

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::EmbeddingInputs g = ws1::ops::embedding_inputs(kOp, in, false);
    const auto tokens = static_cast<std::int64_t>(g.ids.size());
    const DeviceArray<bf16> table = upload_bf16(*g.table);
    const DeviceArray<std::int64_t> ids = ew::upload_vector(g.ids);
    auto y = poisoned<bf16>(static_cast<std::size_t>(tokens * g.hidden));
    launch_region("embedding.fwd",
                  [&] { ew::gather_rows(y.get(), table.get(), ids.get(), tokens, g.hidden); });
    return ws1::Tensors{{"y", download_bf16(y, g.out_shape)}};
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::EmbeddingInputs g = ws1::ops::embedding_inputs(kOp, in, true);
    const auto n = static_cast<std::int64_t>(g.ids.size());
    const std::int64_t h = g.hidden;
    std::vector<std::int64_t> order(g.ids.size());
    std::iota(order.begin(), order.end(), std::int64_t{0});
    const DeviceArray<bf16> dy = upload_bf16(*g.dy);
    // Validated ids are non-negative: their int64 bits sort as uint64 on the low end_bit bits.
    const DeviceArray<std::int64_t> ids = ew::upload_vector(g.ids);
    const DeviceArray<std::int64_t> tokens = ew::upload_vector(order);
    DeviceArray<std::uint64_t> sorted_ids(order.size());
    DeviceArray<std::int64_t> sorted_tokens(order.size());
    const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(g.vocab - 1))));
    const auto* keys = reinterpret_cast<const std::uint64_t*>(ids.get());
    std::size_t temp_bytes = 0;
    if (n > 0)
      WS1_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted_ids.get(),
                                               tokens.get(), sorted_tokens.get(), n, 0, end_bit));
    DeviceArray<unsigned char> temp(std::max<std::size_t>(temp_bytes, 1));  // null means "query"
    DeviceArray<bf16> dtable(static_cast<std::size_t>(g.vocab * h));
    launch_region("embedding.bwd", [&] {
      if (dtable.size() > 0) WS1_CUDA(cudaMemsetAsync(dtable.get(), 0, dtable.bytes()));
      if (n == 0 || h == 0) return;
      WS1_CUDA(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys, sorted_ids.get(),
                                               tokens.get(), sorted_tokens.get(), n, 0, end_bit));
      if (h % ew::kVec == 0)
        launch_dtable<ew::kVec>(dtable.get(), dy.get(), sorted_ids.get(), sorted_tokens.get(), n, h);
      else
        launch_dtable<1>(dtable.get(), dy.get(), sorted_ids.get(), sorted_tokens.get(), n, h);
      check_launch(kDtableKernel);
    });
    return ws1::Tensors{{"dtable", download_bf16(dtable, {g.vocab, h})}};
  });
}

}  // namespace

const CudaOp& embedding_cuda() {
  static const CudaOp op{kOp, forward, backward, ew::kGatherRowsKernel,
                         "cub::DeviceRadixSort::SortPairs,embedding_dtable_kernel"};
  return op;
}

}  // namespace ws1cuda
