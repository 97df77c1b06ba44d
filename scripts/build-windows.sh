#!/usr/bin/env bash
# Cross-builds dmlserve for 64-bit Windows on Debian 12 and packages it:
#
#   scripts/build-windows.sh OUT_DIR
#
# writes OUT_DIR/dmlserve-<version>-windows-x64.zip with
#   dmlserve.exe          the server: gRPC and KServe v2 APIs, CPU and D3D12
#                         backends, TLS, metrics, tensor repository, and the
#                         Windows service (`dmlserve.exe service install ...`)
#   dmlserve-cli.exe      the command-line client
#   install-dmlserve.ps1  installs and starts the service (docs/windows.md)
#   README.txt, windows.md, licenses/
# Both executables are static: they need no DLL but Windows' own (d3d12.dll
# among them).
#
# The dependencies (gRPC, protobuf, Abseil, OpenSSL, prometheus-cpp, ...) are
# cross-built once from Debian's source packages by scripts/windows-deps.sh
# and cached; the build folder is build-windows-mingw (CMake preset
# windows-mingw, toolchain scripts/windows/mingw-w64.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# As scripts/build.sh: ccache sees paths relative to the checkout, so a fresh
# clone elsewhere (a CI machine's new folder) hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
out=${1:?usage: scripts/build-windows.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

prefix=$(scripts/windows-deps.sh | tail -n 1)
export DMLSERVE_WINDOWS_PREFIX=$prefix
build=build-windows-mingw
# Found packages are cached by path: a prefix elsewhere (another
# XDG_CACHE_HOME) needs a fresh configure.
if [[ -f $build/CMakeCache.txt ]] &&
   ! grep -qxF "DMLSERVE_WINDOWS_PREFIX:PATH=$prefix" "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
cmake --preset windows-mingw -DDMLSERVE_WINDOWS_PREFIX="$prefix" >/dev/null
cmake --build --preset windows-mingw -j "$(nproc)" --target dmlserve dmlserve-cli

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
name=dmlserve-$version-windows-x64
stage=$build/package/$name
rm -rf "$build/package"
mkdir -p "$stage/licenses"
cp "$build/server/dmlserve.exe" "$build/client/dmlserve-cli.exe" "$stage/"
x86_64-w64-mingw32-strip "$stage"/*.exe
cp deploy/windows/install-dmlserve.ps1 deploy/windows/README.txt docs/windows.md "$stage/"
# What the executables bundle: the dependencies (Debian's copyright files),
# DirectX-Headers, and mingw-w64's runtime (libstdc++, libgcc, winpthreads).
cp "$prefix"/licenses/*.copyright "$stage/licenses/"
cp /usr/share/doc/directx-headers-dev/copyright "$stage/licenses/directx-headers.copyright"
cp /usr/share/doc/gcc-mingw-w64-base/copyright "$stage/licenses/gcc-mingw-w64.copyright"
cp /usr/share/doc/mingw-w64-common/copyright "$stage/licenses/mingw-w64.copyright"
cp "$prefix/versions.txt" "$stage/licenses/source-packages.txt"
rm -f "$out/$name.zip"
(cd "$build/package" && cmake -E tar cf "$out/$name.zip" --format=zip "$name")
echo "$out/$name.zip"
