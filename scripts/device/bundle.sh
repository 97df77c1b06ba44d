#!/usr/bin/env bash
# Packs what a lent device machine needs to measure dmlserve there into
# .device/bundle.tar.xz (git-ignored): the binaries built here by
# scripts/build.sh and every shared library they load but glibc's, so that
# they run on that machine's own OS. scripts/device/measure.sh, run there,
# unpacks it. See docs/benchmarks.md, "Measuring on a lent machine".
#
#   scripts/device/bundle.sh        # after scripts/build.sh (and libdnnl-dev
#                                   # for the oneDNN bench, optional)
set -euo pipefail
cd "$(dirname "$0")/../.."
binaries=(
  build/server/dmlserve
  build/bench/dmlserve_bench
  build/bench/load_generator/dmlserve-load
  build/bench/load_generator/dmlserve-echo
  build/tests/kernels/dmlserve_kernels_test
  build/tests/d3d12/d3d12_backend_test
  build/tests/d3d12/d3d12_kernels_test
)
[[ -x build/bench/dmlserve_onednn_bench ]] && binaries+=(build/bench/dmlserve_onednn_bench)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for binary in "${binaries[@]}"; do
  [[ -x $binary ]] || { echo "bundle.sh: $binary is not built (scripts/build.sh)" >&2; exit 1; }
  cp "$binary" "$stage/bin/"
  # glibc stays: the machine's own must match its kernel and loader.
  ldd "$binary" | awk '/=> \// { print $3 }' |
    grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r library; do
      # Each library once (cp -n's exit status differs between coreutils versions).
      [[ -e $stage/lib/${library##*/} ]] || cp -L "$library" "$stage/lib/"
    done
done
# glvnd's libraries, which no binary links but NVIDIA's Vulkan driver
# (libGLX_nvidia.so.0) needs: without them the loader gets no
# vkCreateInstance from it (docs/d3d12.md, "On a real GPU"). With their own
# dependencies (libX11 and the like).
for name in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libGL.so.1 libOpenGL.so.0 libGLESv2.so.2; do
  library=/usr/lib/x86_64-linux-gnu/$name
  [[ -e $library ]] || { echo "bundle.sh: $library is missing (apt-get install libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2)" >&2; exit 1; }
  cp -L "$library" "$stage/lib/"
  # (grep finds nothing for libGLdispatch, which needs glibc alone.)
  ldd "$library" | awk '/=> \// { print $3 }' |
    { grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' || true; } |
    while read -r dependency; do
      [[ -e $stage/lib/${dependency##*/} ]] || cp -L "$dependency" "$stage/lib/"
    done
done
cp bench/cpu_isa_report.py "$stage/bin/"
mkdir -p .device
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"
tar -C "$stage" -cJf .device/bundle.tar.xz bin lib
echo "bundle.sh: .device/bundle.tar.xz, $(du -h .device/bundle.tar.xz | cut -f1)" \
  "($(ls "$stage/bin" | wc -l) programs, $(ls "$stage/lib" | wc -l) libraries)"
