#!/usr/bin/env bash
# Installs what dmlserve needs to build, test and run, from Debian 12 packages
# only. Safe to re-run: it installs only what is missing.
set -euo pipefail

packages=(
  # Build
  # (build-essential brings GCC's ASan/UBSan/TSan runtimes for scripts/sanitize.sh)
  build-essential cmake ninja-build ccache pkg-config
  # gRPC, protobuf, Abseil, JSON, HTTP
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto libabsl-dev
  nlohmann-json3-dev prometheus-cpp-dev libcivetweb-dev
  # Tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3-grpcio python3-protobuf python3-numpy prometheus
  # pip install ./client/python, tested offline in a fresh venv
  python3-venv python3-setuptools python3-wheel
  # Certificates for the TLS tests
  openssl
  # The quick start's /metrics call (README.md)
  curl
  # D3D12 through vkd3d on Vulkan (lavapipe when there is no GPU)
  libvkd3d-dev libvkd3d-utils1 vkd3d-compiler libvulkan-dev mesa-vulkan-drivers
)
if [[ "${DMLSERVE_WINDOWS_CROSS:-1}" == 1 ]]; then
  # Proves the D3D12 backend and the Windows service build for Windows (mingw-w64, whose
  # binutils bring windmc for the event log's messages), and runs them under wine (the
  # service test finds the service's process with pgrep: procps).
  # scripts/windows-deps.sh cross-builds gRPC and its dependencies from Debian's
  # sources: dpkg-source unpacks them, re2's Unicode tables are generated from
  # unicode-data.
  packages+=(g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64 directx-headers-dev wine64 xvfb
             xauth procps dpkg-dev unicode-data python3-six)
fi

# The Node.js client's test (tests/node): Debian's nodejs and npm, unless a Node.js with
# npm is already installed (NodeSource's bundles npm and conflicts with Debian's).
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
