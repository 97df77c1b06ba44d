# CMake toolchain file: 64-bit Windows with Debian's mingw-w64 GCC
# (apt-get install g++-mingw-w64-x86-64-posix). The "posix" thread model is
# the one with std::thread and std::mutex. Used by scripts/windows-deps.sh
# (the dependencies), scripts/build-windows.sh (dmlserve.exe) and the
# Windows tests.
#
# DMLSERVE_WINDOWS_PREFIX: the cross-built dependencies
# (scripts/windows-deps.sh prints it); packages and libraries are looked up
# there and in mingw-w64's own sysroot, never in the Linux system.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_AR x86_64-w64-mingw32-gcc-ar-posix CACHE FILEPATH "")
set(CMAKE_RANLIB x86_64-w64-mingw32-gcc-ranlib-posix CACHE FILEPATH "")
set(DMLSERVE_WINDOWS_PREFIX "$ENV{DMLSERVE_WINDOWS_PREFIX}" CACHE PATH
    "The cross-built dependencies (scripts/windows-deps.sh)")
set(CMAKE_FIND_ROOT_PATH ${DMLSERVE_WINDOWS_PREFIX} /usr/x86_64-w64-mingw32)
# Programs (protoc, grpc_cpp_plugin) run here: Debian's, the same versions
# as the cross-built libraries.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Windows 10 API level. gRPC and c-ares define _WIN32_WINNT=0x600 themselves;
# a value in the flags comes after theirs on the command line and wins.
# -mbig-obj: large translation units pass PE/COFF's 32k-section limit.
set(CMAKE_C_FLAGS_INIT "-D_WIN32_WINNT=0x0A00 -Wa,-mbig-obj")
set(CMAKE_CXX_FLAGS_INIT "-D_WIN32_WINNT=0x0A00 -Wa,-mbig-obj")
# One .exe with no MinGW runtime DLLs to ship beside it.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -static-libgcc -static-libstdc++")
