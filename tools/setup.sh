#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for ws1check and builds it into ./build.
# Installs the Debian packages the build needs (apt-get, as root or through sudo), configures
# Meson (CUDA is built when nvcc is found, at /usr/local/cuda on our machines) and compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build pkg-config g++ git libcli11-dev libsimdjson-dev nlohmann-json3-dev
          libspdlog-dev libfmt-dev libxxhash-dev catch2 libssl-dev python3-numpy
          python3-jsonschema  # the contract and committed-evidence schema tests (else skipped)
          chromium chromium-driver)  # chromium: the gate's HTML report is checked headless
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f build/build.ninja ]; then
  meson setup build >&2
fi
ninja -C build >&2
