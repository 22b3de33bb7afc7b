#!/usr/bin/env bash
# Builds a Debian package of ws1check from a configured, built Meson directory:
#   bash tools/package_deb.sh [BUILD_DIR [OUT_DIR]]      (defaults: build, .)
# It lays out `meson install` under /usr (bin/ws1check, share/ws1check: contracts, fixtures,
# the Triton worker, the Python package), takes Depends from the binary's shared libraries
# (dpkg-shlibdeps; a CUDA build's CUDA libraries come from the CUDA toolkit, not from Debian, and
# are named in the description instead), and writes OUT_DIR/ws1check_VERSION_ARCH.deb. The
# binary finds its data relative to itself, so moving the install prefix to /usr is safe.
# Prints the package's path. Needs dpkg-dev (dpkg-shlibdeps) and dpkg-deb >= 1.19 (--root-owner-group:
# no fakeroot).
set -euo pipefail
build=${1:-build}
out=${2:-.}
for tool in dpkg-deb dpkg-shlibdeps meson; do
  command -v "$tool" >/dev/null || { echo "package_deb: $tool not found (Debian: dpkg-dev, meson)" >&2; exit 2; }
done
[ -f "$build/build.ninja" ] || { echo "package_deb: $build: not a configured Meson build directory" >&2; exit 2; }
[ -x "$build/cli/ws1check" ] || { echo "package_deb: $build/cli/ws1check: not built (ninja -C $build cli/ws1check)" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --destdir "$stage/install" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
pkg=$stage/pkg
mkdir -p "$pkg/usr" "$pkg/DEBIAN"
cp -a "$stage/install$prefix/." "$pkg/usr/"
find "$pkg" -name __pycache__ -prune -exec rm -rf {} +
strip --strip-debug "$pkg/usr/bin/ws1check"  # as Debian's packages ship binaries (debug info apart)

# Depends: the packages of the binary's shared libraries (dpkg-shlibdeps wants a debian/control).
mkdir -p "$stage/src/debian"
printf 'Source: ws1check\n\nPackage: ws1check\nArchitecture: any\n' >"$stage/src/debian/control"
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O --ignore-missing-info -e "$pkg/usr/bin/ws1check" 2>"$stage/shlibdeps.log" |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "package_deb: dpkg-shlibdeps found no dependency:" >&2; cat "$stage/shlibdeps.log" >&2; exit 1; }
cuda_note=""
if ldd "$pkg/usr/bin/ws1check" | grep -q 'libcudart'; then
  cuda_note=" This build has the CUDA backends: it needs the CUDA 13 runtime and cuBLAS libraries of NVIDIA's toolkit on the library path (not Debian packages)."
fi

version=$("$build/cli/ws1check" --version | sed -n 's/^ws1check \([^ ]*\) (source \([0-9a-f]\{7\}\).*/\1+git\2/p')
[ -n "$version" ] || version=$(meson introspect "$build" --projectinfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
size=$(du -sk "$pkg/usr" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: ws1check
Version: $version
Architecture: $arch
Maintainer: ws1check developers <ws1check@localhost>
Installed-Size: $size
Depends: $shlibs
Recommends: python3
Suggests: python3-torch, python3-numpy
Section: devel
Priority: optional
Description: conformance checker for the WS1 numerical precision standard
 ws1check judges BF16 GPU kernels against the WS1 standard: forward and gradient accuracy
 against an FP32 reference, bitwise invariance under batch, chunk, padding and layout
 transforms, and teacher-forcing against rollout parity, leaving auditable evidence.
 share/ws1check holds the contracts, workload manifests, the Triton worker and the Python
 package (PYTHONPATH=/usr/share/ws1check/python) for serving one's own kernels.$cuda_note
EOF
mkdir -p "$out"
deb="$out/ws1check_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$deb" >/dev/null
echo "$deb"
