#!/bin/sh
# Cross-compiles the D3D12 runtime and its Windows test program
# (tests/windows/project) with mingw-w64, proving that the sources build
# against the Windows SDK headers. Registered as the ctest
# d3d12_windows_cross_compile.
#
#   cross_compile.sh <build dir>
#
# With DMLSERVE_WINDOWS_RUN=1 it also runs the .exe under wine64 + xvfb-run
# (apt-get install wine64 xvfb): wine's D3D12 is vkd3d over lavapipe, which
# works with root descriptors only, as dmlserve uses.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: cross_compile.sh <build dir>}
mkdir -p "$build"
build=$(cd "$build" && pwd)

if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1; then
  echo "FAIL: x86_64-w64-mingw32-g++-posix not found: apt-get install g++-mingw-w64-x86-64" >&2
  exit 1
fi

cmake -S "$here/project" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$here/mingw-w64.cmake"
cmake --build "$build" -j2
exe="$build/d3d12_windows_runtime_test.exe"
test -f "$exe"
echo "built $exe"

if [ "${DMLSERVE_WINDOWS_RUN:-0}" = 1 ]; then
  wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
  export WINEPREFIX="$build/wineprefix" WINEDEBUG=-all
  xvfb-run -a -s "-screen 0 640x480x24" "$wine" "$exe"
fi
