#!/bin/sh
# Cross-compiles the D3D12 backend for Windows with mingw-w64
# (tests/windows/project), proving that the same sources build against the
# Windows headers (DirectX-Headers' d3d12.h, mingw-w64's dxgi1_6.h):
#   d3d12_windows_runtime_test.exe      the runtime + the test kernels
#   d3d12_windows_conformance_test.exe  the whole backend + conformance cases
#   dmlserve_engine_service.exe         the Windows service layer around the
#                                       scheduler, CPU and D3D12 devices (run
#                                       by service/windows_service_test.py)
# Registered as the ctest d3d12_windows_cross_compile.
#
#   cross_compile.sh <build dir>
#
# With DMLSERVE_WINDOWS_RUN=1 it then runs both under wine64 + xvfb-run
# (apt-get install wine64 xvfb, about 690 MB): wine's D3D12 is vkd3d over lavapipe, which
# works with root descriptors only, as dmlserve uses.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: cross_compile.sh <build dir>}
mkdir -p "$build"
build=$(cd "$build" && pwd)

if ! command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1; then
  echo "FAIL: x86_64-w64-mingw32-g++-posix not found: apt-get install g++-mingw-w64-x86-64-posix" >&2
  exit 1
fi

launcher=
if command -v ccache >/dev/null 2>&1; then launcher=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
cmake -S "$here/project" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$here/mingw-w64.cmake" $launcher
cmake --build "$build" -j2
for exe in d3d12_windows_runtime_test d3d12_windows_conformance_test dmlserve_engine_service; do
  test -f "$build/$exe.exe"
  echo "built $build/$exe.exe"
done

if [ "${DMLSERVE_WINDOWS_RUN:-0}" = 1 ]; then
  wine=$(command -v wine64 || echo /usr/lib/wine/wine64)
  # No Mono/Gecko: their first-run install prompts could wait forever under xvfb.
  export WINEPREFIX="$build/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
  # D3D12 under wine needs an X display (wined3d creates the DXGI adapter).
  xvfb-run -a -s "-screen 0 640x480x24" "$wine" "$build/d3d12_windows_runtime_test.exe"
  # Z: is wine's drive for the Linux root.
  xvfb-run -a -s "-screen 0 640x480x24" "$wine" "$build/d3d12_windows_conformance_test.exe" \
    "Z:$root/tests/conformance"
fi
