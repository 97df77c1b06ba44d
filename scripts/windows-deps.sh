#!/usr/bin/env bash
# Cross-builds dmlserve's dependencies for 64-bit Windows (mingw-w64, static
# libraries) from Debian 12's own source packages, and prints the prefix
# they are installed in (the last line of stdout).
#
#   scripts/windows-deps.sh            # build or reuse; prints the prefix
#   DMLSERVE_WINDOWS_DEPS_JOBS=N       # parallel jobs (default: nproc)
#
# Debian ships gRPC, protobuf, Abseil and prometheus-cpp for Linux only, but
# its registry serves their sources: a deb-src entry for the release, then
# `apt-get source` for each package (Debian's patches applied). protoc and
# grpc_cpp_plugin come from Debian's host packages, the same versions.
#
# The prefix is cached in ${XDG_CACHE_HOME:-~/.cache}/dmlserve/windows-deps/prefix,
# keyed by the source package versions and by the hash of this script, the
# CMake files beside it (the toolchain, gRPC's unity build) and the patches
# (prefix/.key): a warm machine rebuilds nothing, a cold one builds it once
# (docs/windows.md gives both times), a changed key rebuilds it (ccache keeps
# that short). The source archives are cached beside it, so a warm machine
# downloads nothing either.
#
# The small fixes Debian's sources need for mingw-w64 are in
# scripts/windows/patches/, each with a one-line reason.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
toolchain=$here/windows/mingw-w64.cmake
patches=$here/windows/patches
jobs=${DMLSERVE_WINDOWS_DEPS_JOBS:-$(nproc)}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dmlserve/windows-deps
log() { echo "windows-deps: $*" >&2; }
# Each package's build writes to its own log; fd 4 still reaches the caller.
exec 4>&2

# Source package → its part of the key. Order is the build order.
packages=(zlib c-ares re2 abseil protobuf openssl grpc civetweb prometheus-cpp nlohmann-json3)

# --- Sources ---------------------------------------------------------------
# A deb-src entry for this machine's own release and mirrors.
ensure_deb_src() {
  local list=/etc/apt/sources.list.d/dmlserve-deb-src.sources
  if apt-get source --print-uris grpc >/dev/null 2>&1; then return; fi
  log "adding deb-src entries ($list)"
  local sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  local main=/etc/apt/sources.list.d/debian.sources
  if [[ -f $main ]]; then
    # Deb822: the same stanzas, as source entries.
    sed -e 's/^Types:.*/Types: deb-src/' "$main" | $sudo tee "$list" >/dev/null
  else
    grep -h '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
      $sudo tee "${list%.sources}.list" >/dev/null
  fi
  $sudo apt-get update -qq
}

# Prints the newest version of source package $1 whose files download (or are
# already in the cache). Debian's security mirror sometimes lists a version
# whose .dsc is not there yet: the next older one is taken then.
resolve_source() {
  local pkg=$1 version
  local versions
  versions=$(apt-cache showsrc --only-source "$pkg" | sed -n 's/^Version: //p' |
             sort -u | sort -r -V)
  for version in $versions; do
    local dsc=$cache/sources/${pkg}_${version#*:}.dsc
    if [[ -f $dsc ]]; then echo "$version"; return; fi
    if (cd "$cache/sources" && apt-get source --download-only -qq "$pkg=$version" \
          >/dev/null 2>&1) && [[ -f $dsc ]]; then
      echo "$version"; return
    fi
    log "$pkg $version: not downloadable from the mirror, trying an older version"
  done
  log "no version of source package $pkg could be downloaded"; return 1
}

mkdir -p "$cache/sources"
# One build at a time per cache (say, two checkouts building at once).
exec 9>"$cache/.lock"
flock 9
versions=()
if ! command -v apt-cache >/dev/null; then log "needs Debian's apt"; exit 1; fi
ensure_deb_src
for pkg in "${packages[@]}"; do
  versions+=("$pkg=$(resolve_source "$pkg")")
done
key=$( { printf '%s\n' "${versions[@]}"; cat "$0" "$here"/windows/*.cmake "$patches"/*; } |
       sha256sum | cut -c1-16)
# One prefix path whatever the key (the key is recorded inside it): compiler
# command lines stay the same across keys, so ccache serves a rebuild.
prefix=$cache/prefix
if [[ -f $prefix/.complete && $(cat "$prefix/.key") == "$key" ]]; then
  log "cached: $prefix"
  echo "$prefix"
  exit 0
fi

# --- Build -----------------------------------------------------------------
# The same build folder whatever the key, and ccache told to ignore it in
# paths: a changed recipe recompiles only what it changed.
work=$cache/build
rm -rf "$work" "$prefix"
mkdir -p "$work/src" "$prefix"
export DMLSERVE_WINDOWS_PREFIX=$prefix CCACHE_BASEDIR=$cache
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake_build() {  # cmake_build NAME SOURCE_DIR [cmake args...]: configure, build, install
  local name=$1 src=$2; shift 2
  cmake -S "$src" -B "$work/$name" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix" \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_CXX_STANDARD=17 "${launcher[@]}" "$@"
  ninja -C "$work/$name" -j "$jobs" install
}
unpack() {  # unpack PKG: extracts with Debian's patches applied; prints the folder
  local pkg=$1 version
  for v in "${versions[@]}"; do [[ ${v%%=*} == "$pkg" ]] && version=${v#*=}; done
  local dir=$work/src/$pkg
  dpkg-source --no-check -q -x "$cache/sources/${pkg}_${version#*:}.dsc" "$dir" >/dev/null 2>&1
  echo "$dir"
}
apply_patch() { patch -d "$1" -p1 -s < "$patches/$2"; }

build_zlib() {
  # zlib's own Makefile: its CMake build wants win32/zlib1.rc for the DLL,
  # which Debian's dfsg tarball drops.
  local src; src=$(unpack zlib)
  (cd "$src" && CHOST=x86_64-w64-mingw32 CC=x86_64-w64-mingw32-gcc-posix \
     AR=x86_64-w64-mingw32-ar RANLIB=x86_64-w64-mingw32-ranlib \
     ./configure --static --prefix="$prefix" && make -j "$jobs" libz.a)
  mkdir -p "$prefix/include" "$prefix/lib"
  cp "$src/zlib.h" "$src/zconf.h" "$prefix/include/"
  cp "$src/libz.a" "$prefix/lib/"
}
build_c-ares() {
  local src; src=$(unpack c-ares)
  apply_patch "$src" c-ares-inaddrsz.patch
  cmake_build c-ares "$src" -DCARES_STATIC=ON -DCARES_SHARED=OFF -DCARES_BUILD_TOOLS=OFF \
    -DCARES_BUILD_TESTS=OFF
}
build_re2() {
  # Debian's dfsg tarball drops the generated Unicode tables; Debian's own
  # patch points the generators at unicode-data's /usr/share/unicode.
  local src; src=$(unpack re2)
  (cd "$src/re2" && perl make_perl_groups.pl > perl_groups.cc &&
   /usr/bin/python3 make_unicode_casefold.py > unicode_casefold.cc &&
   /usr/bin/python3 make_unicode_groups.py > unicode_groups.cc)
  cmake_build re2 "$src" -DRE2_BUILD_TESTING=OFF
}
build_abseil() {
  cmake_build abseil "$(unpack abseil)" -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_TESTING=OFF \
    -DABSL_ENABLE_INSTALL=ON
}
build_protobuf() {
  # libprotoc too: gRPC's code generation targets (server reflection) link it.
  cmake_build protobuf "$(unpack protobuf)" -Dprotobuf_BUILD_TESTS=OFF \
    -Dprotobuf_BUILD_PROTOC_BINARIES=OFF -Dprotobuf_BUILD_LIBPROTOC=ON \
    -Dprotobuf_WITH_ZLIB=OFF -Dprotobuf_BUILD_EXAMPLES=OFF
}
build_openssl() {
  # Only the libraries gRPC's TLS uses; protocols and algorithms nobody
  # negotiates with a gRPC server are left out.
  local src; src=$(unpack openssl)
  (cd "$src" &&
   CC="ccache x86_64-w64-mingw32-gcc-posix" AR=x86_64-w64-mingw32-ar \
   RANLIB=x86_64-w64-mingw32-ranlib RC=x86_64-w64-mingw32-windres \
   ./Configure mingw64 no-shared no-tests no-legacy no-engine no-dso no-comp \
     no-idea no-mdc2 no-rc5 no-seed no-whirlpool no-camellia no-aria no-sm2 no-sm3 no-sm4 \
     no-srp no-gost no-cms no-ts no-ct no-ocsp no-ssl3 no-dtls no-sctp no-srtp no-siphash \
     no-scrypt --prefix="$prefix" --libdir=lib -D_WIN32_WINNT=0x0A00 &&
   make -j "$jobs" build_libs && make install_dev)
}
build_grpc() {
  local src; src=$(unpack grpc)
  cmake -S "$src" -B "$work/grpc" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_PREFIX_PATH="$prefix" \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_CXX_STANDARD=17 "${launcher[@]}" \
    -DgRPC_INSTALL=ON -DgRPC_BUILD_TESTS=OFF -DgRPC_BUILD_CODEGEN=ON \
    -DgRPC_BUILD_GRPC_CPP_PLUGIN=OFF -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF \
    -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF \
    -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF \
    -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF -DgRPC_BUILD_CSHARP_EXT=OFF \
    -DgRPC_ZLIB_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_RE2_PROVIDER=package \
    -DgRPC_SSL_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package \
    -DgRPC_PROTOBUF_PACKAGE_TYPE=CONFIG -DgRPC_ABSL_PROVIDER=package \
    -DgRPC_BENCHMARK_PROVIDER=none -DOPENSSL_USE_STATIC_LIBS=ON -DOPENSSL_ROOT_DIR="$prefix" \
    -DLIB_EAY="$prefix/lib/libcrypto.a" -DSSL_EAY="$prefix/lib/libssl.a" \
    -DCMAKE_PROJECT_INCLUDE="$here/windows/grpc-unity.cmake"
  # The secure libraries and server reflection only. grpc_unsecure and
  # grpc++_unsecure are a second build of gRPC's core (about 40% of gRPC's
  # build time) that dmlserve never links: their install rules get empty
  # archives, so that gRPC's own CMake package installs and loads as is.
  local targets=(grpc++ grpc++_reflection grpc++_alts grpc++_error_details grpcpp_channelz
                 grpc_plugin_support)
  # A unity build (grpc-unity.cmake says why, and which files stay apart).
  # Should it fail (a gRPC whose files clash where the list does not say: the
  # log names the two definitions), a build file by file follows: slower, and
  # what a plain gRPC build does.
  if ! ninja -C "$work/grpc" -j "$jobs" "${targets[@]}"; then
    echo "windows-deps: gRPC's unity build failed ($work/grpc.log says where);" \
      "building gRPC file by file" | tee /dev/fd/4
    cmake "$work/grpc" -DDMLSERVE_GRPC_UNITY=OFF
    ninja -C "$work/grpc" -j "$jobs" "${targets[@]}" || return 1
  fi
  local lib
  for lib in grpc_unsecure grpc++_unsecure; do
    x86_64-w64-mingw32-ar rc "$work/grpc/lib$lib.a"
  done
  cmake --install "$work/grpc"
}
build_civetweb() {
  cmake_build civetweb "$(unpack civetweb)" -DCIVETWEB_ENABLE_CXX=ON \
    -DCIVETWEB_BUILD_TESTING=OFF -DCIVETWEB_ENABLE_SERVER_EXECUTABLE=OFF \
    -DCIVETWEB_ENABLE_SSL=OFF -DCIVETWEB_ENABLE_ASAN=OFF -DCIVETWEB_INSTALL_EXECUTABLE=OFF
}
build_prometheus-cpp() {
  cmake_build prometheus-cpp "$(unpack prometheus-cpp)" -DENABLE_PUSH=OFF -DENABLE_PULL=ON \
    -DENABLE_TESTING=OFF -DUSE_THIRDPARTY_LIBRARIES=OFF -DENABLE_COMPRESSION=ON \
    -DGENERATE_PKGCONFIG=OFF
}
build_nlohmann-json3() {
  cmake_build nlohmann-json3 "$(unpack nlohmann-json3)" -DJSON_BuildTests=OFF -DJSON_Install=ON
}

started=$(date +%s)
for pkg in "${packages[@]}"; do
  t=$(date +%s)
  log "building $pkg"
  if ! "build_$pkg" >"$work/$pkg.log" 2>&1; then
    log "FAILED: $pkg (log: $work/$pkg.log)"; tail -40 "$work/$pkg.log" >&2; exit 1
  fi
  log "$pkg: $(( $(date +%s) - t )) s"
  echo "$pkg $(( $(date +%s) - t ))" >> "$prefix/build-seconds.txt"
done
# The license of every package bundled into the executables, for the zip.
mkdir -p "$prefix/licenses"
for pkg in "${packages[@]}"; do
  cp "$work/src/$pkg/debian/copyright" "$prefix/licenses/$pkg.copyright"
done
printf '%s\n' "${versions[@]}" > "$prefix/versions.txt"
log "built in $(( $(date +%s) - started )) s: $prefix"
rm -rf "$work"
echo "$key" > "$prefix/.key"
touch "$prefix/.complete"
echo "$prefix"
