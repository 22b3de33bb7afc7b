#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for ws1check and builds it into ./build.
#   bash tools/setup.sh [--tests] [TARGET...]
# Installs the Debian packages the build needs (apt-get, as root or through sudo; its output goes
# to build-setup.log, shown only when it fails) — with --tests also those the test suite uses —
# configures Meson (CUDA is built when nvcc is found, at /usr/local/cuda on our machines, unless
# no GPU answers and --tests is not given) and
# compiles the targets named as arguments — by default only the CLI, build/cli/ws1check
# (`meson test` builds the tests it runs itself).
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
[ "${1:-}" = "--tests" ] && { tests=1; shift; }
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(cli/ws1check)

packages=(meson ninja-build pkg-config g++ git libcli11-dev libsimdjson-dev nlohmann-json3-dev
          libspdlog-dev libfmt-dev libxxhash-dev catch2 libssl-dev)
if [ $tests -eq 1 ]; then
  packages+=(python3-numpy      # the oracle scripts and the Python workers' tests
             python3-jsonschema # the contract and committed-evidence schema tests
             python3-torch      # ws1check.serve with PyTorch callables (test/backend/torch_worker_test.py)
             dpkg-dev           # the Debian package (tools/package_deb.sh, test/cli/deb_test.py)
             chromium chromium-driver)  # the gate's HTML report, checked headless
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${#missing[@]} Debian packages (apt-get; log: build-setup.log)" >&2
  if ! { $sudo apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
       >build-setup.log 2>&1; then
    tail -n 20 build-setup.log >&2
    echo "setup: apt-get failed (build-setup.log has all of it)" >&2
    exit 1
  fi
fi

[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f build/build.ninja ]; then
  # The CUDA backends are built where nvcc is found and either a GPU answers or the tests are
  # wanted (CI compiles the CUDA code without a GPU); the main job on a machine without a GPU
  # runs cpu_bf16 and does not wait for kernels it cannot run.
  cuda=auto
  if [ $tests -eq 0 ] && command -v nvcc >/dev/null && ! nvidia-smi -L >/dev/null 2>&1; then
    cuda=disabled
    echo "setup: no GPU found (nvidia-smi): building without the CUDA backends" \
         "(tools/setup.sh --tests, or meson configure build -Dcuda=enabled, builds them)" >&2
  fi
  meson setup build -Dcuda=$cuda >&2
fi
start=$SECONDS
if grep -q "WS1_HAVE_CUDA 1" build/ws1_build_config.h 2>/dev/null; then
  expect="the first build, CUDA kernels included, takes about 10 minutes on 2 cores"
else
  expect="the first build takes a few minutes on 2 cores"
fi
echo "setup: building ${targets[*]} on $(nproc) cores ($expect)" >&2
ninja -C build "${targets[@]}" >&2
echo "setup: built in $((SECONDS - start)) s" >&2
