// Invariance cells (spec §4.2, DESIGN §3.3 and §5, upstream NOTES §d): the candidate run under a
// transform of the batch (chunking, singleton runs, permutation, padding, strided layout, a
// two-way tensor-parallel K split) must give the same bits, at every active logical token, as
// the canonical run. Candidate against candidate: no reference takes part.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/evidence.hpp"
#include "ws1/fixture.hpp"
#include "ws1/op.hpp"
#include "ws1/runner.hpp"

namespace ws1 {

// The canonical configuration every transform is compared with is `BN/full`: the N samples of
// the primary matrix in sample order, in one call — packed token rows for row-wise ops, a
// right-padded [N, longest] grid with a key mask for attention (which takes [B, H, S, D]).
enum class Transform {
  kBnChunked,      // "BN/chunked": one call per chunk of chunk_size tokens of each sample
  kB1Chunked,      // "B1/chunked": one call per chunk of each singleton sample
  kB1Full,         // "B1/full": one call per sample (the singleton runs)
  kBnPermuted,     // "BN/permuted": one call, samples in batch_permutation order
  kBnPaddedRight,  // "BN/padded_right": [N, padded_len] grid, pads after each sample
  kBnPaddedLeft,   // "BN/padded_left": pads before each sample
  kLayout,         // "layout": the canonical call on strided (non-contiguous) inputs
  kTp2,            // "tp2": det_gemm with K split over two ranks, partial outputs summed
  kTp4,            // "tp4", "tp8": the same over four and eight ranks (N/A unless the contract
  kTp8,            //   declares that many K shards)
  kRepeat,         // "repeat": the canonical call made again on the same inputs: a candidate
                   // whose bits change from one call to the next (not repeatable) is red
};

std::string_view transform_name(Transform t);
std::optional<Transform> transform_from_name(std::string_view name);
std::span<const Transform> all_transforms();  // in the order above
// The ranks of a tensor-parallel transform (2, 4, 8), 0 for the others.
int tp_ranks(Transform t);

// Why `op` has no `t` cell in `direction`, or nullopt when it has one. `listed` is false for
// pairs that `--transform all` leaves out instead of reporting N/A (tp2 for ops without a K
// split).
struct NotApplicable {
  std::string reason;
  bool listed = true;
};
std::optional<NotApplicable> transform_not_applicable(const Op& op, Transform t,
                                                      Direction direction);

// Whether `t` judges parameter gradients (dweight, dW, ...) bit for bit: only transforms that
// keep the canonical tokens together and in order (layout, tp2, repeat). Under the others they are
// measured and reported in an N/A cell (docs/decisions.md D13), with this reason prefix.
bool transform_judges_parameters(Transform t);
inline constexpr std::string_view kParametersRegroupedReason =
    "parameter gradients reduce over the call's tokens; the transform regroups or reorders them, "
    "which changes the FP32 summation order (docs/decisions.md D13)";

// Every invariance cell of `op` for `judgment` (kForwardInvariance or kGradientInvariance) and
// the transforms asked for, on the op's invariance fixture (tier "invariance", upstream's
// exact-in-bf16 pattern). The canonical run is made once. Token outputs and token gradients
// are compared at the active (completion) tokens after restoring logical keys; parameter
// gradients (dweight, dW, ...) whole, in a cell of their own ("<cell>/parameters", see
// docs/decisions.md D13). Bad input (an unpinned fixture, a contract without the row) is an
// Error; whatever the candidate does wrong is a red cell.
Result<std::vector<Cell>> run_invariance_cells(const RunContext& run, FixtureGenerator& generator,
                                               Backend& backend, const Op& op, Judgment judgment,
                                               std::span<const Transform> transforms,
                                               const FixtureSpec& fixture);

}  // namespace ws1
