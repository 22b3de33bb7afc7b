#!/usr/bin/env bash
# Builds what the GPU machine runs (ws1check, test_gpu) and packs it into .device/pack/bin.tgz,
# stripped, for `carry` (../shared/device/README.md).
#   bash tools/device/pack.sh            (BUILD=build by default)
# meson 1.0 records no header dependencies of .cu objects (cuda/meson.build warns), so a header
# they include (lib/include/ws1/*.hpp, lib/ops, cuda/**/*.cuh) changed since the oldest of them
# was compiled would leave stale objects with old struct layouts in the binary: every .cu is
# touched first in that case (a full CUDA rebuild).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
oldest=$(ls -tr "$BUILD"/cuda/libws1cuda.a.p/*.o 2>/dev/null | head -1 || true)
if [ -z "$oldest" ] || [ -n "$(find lib cuda \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) -newer "$oldest" | head -1)" ]; then
  echo "pack: a header is newer than $oldest: recompiling every .cu"
  find cuda -name '*.cu' -exec touch {} +
fi
ninja -C "$BUILD" cli/ws1check test/gpu/test_gpu
rm -rf .device/bin && mkdir -p .device/bin .device/pack
cp "$BUILD/cli/ws1check" "$BUILD/test/gpu/test_gpu" .device/bin/
strip .device/bin/*
tar czf .device/pack/bin.tgz -C .device bin
echo "pack: .device/pack/bin.tgz ($("$BUILD/cli/ws1check" --version 2>/dev/null | head -1))"
