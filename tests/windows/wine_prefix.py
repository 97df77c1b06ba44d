#!/usr/bin/python3
"""The wine prefix the Windows tests share (ctest fixture windows_prefix).

    wine_prefix.py setup ZIP PREFIX     a fresh prefix with ZIP unpacked in C:\\
    wine_prefix.py cleanup ZIP PREFIX   stops the prefix's wine processes

D3D12 under wine needs an X display, and every process of a prefix shares
the display of the desktop process (explorer.exe) that the first of them
started: so setup starts one Xvfb for the prefix and writes its DISPLAY to
PREFIX.display, and the tests run through with_wine_display.sh, which sets
it. cleanup stops that Xvfb too.

setup also checks the zip as a user receives it: the executables, the
install script, the README and the licenses are there, and the executables
need no DLL that Windows does not have (no MinGW runtime beside them).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile

from wine_support import WINE, WINESERVER, Checks, run_wine, wine_env

# What a stock Windows 10 has in System32 (and what wine provides).
SYSTEM_DLLS = {
    "advapi32.dll", "bcrypt.dll", "crypt32.dll", "d3d12.dll", "dbghelp.dll", "dxgi.dll",
    "gdi32.dll", "iphlpapi.dll", "kernel32.dll", "msvcrt.dll", "ole32.dll", "rpcrt4.dll",
    "secur32.dll", "shell32.dll", "shlwapi.dll", "user32.dll", "userenv.dll", "ws2_32.dll",
}


def imported_dlls(exe):
    out = subprocess.run(["x86_64-w64-mingw32-objdump", "-p", exe], capture_output=True,
                         text=True, check=True).stdout
    return {m.lower() for m in re.findall(r"DLL Name: (\S+)", out)}


def start_xvfb(prefix):
    """Starts an Xvfb on a free display for the prefix; returns the DISPLAY."""
    for number in range(90, 400):
        if os.path.exists(f"/tmp/.X11-unix/X{number}") or os.path.exists(f"/tmp/.X{number}-lock"):
            continue
        server = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", "640x480x24",
                                  "-nolisten", "tcp"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline and server.poll() is None:
            if os.path.exists(f"/tmp/.X11-unix/X{number}"):
                with open(prefix + ".display", "w") as f:
                    f.write(f":{number} {server.pid}\n")
                return f":{number}"
            time.sleep(0.1)
        server.kill()  # lost a race for this number: try the next
    raise RuntimeError("no free X display for Xvfb")


def stop_xvfb(prefix):
    try:
        with open(prefix + ".display") as f:
            pid = int(f.read().split()[1])
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        pass
    if os.path.exists(prefix + ".display"):
        os.remove(prefix + ".display")


def setup(zip_path, prefix):
    if not os.path.exists(zip_path):
        print(f"FAIL {zip_path} does not exist: scripts/build-windows.sh {os.path.dirname(zip_path)} "
              "makes it (./test.sh does)")
        return 1
    cleanup(prefix)
    shutil.rmtree(prefix, ignore_errors=True)
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    env = dict(wine_env(prefix), DISPLAY=start_xvfb(prefix))
    subprocess.run([WINE, "wineboot", "-i"], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    subprocess.run([WINESERVER, "-w"], env=env, timeout=300)

    check = Checks()
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        archive.extractall(os.path.join(prefix, "drive_c"))
    top = {n.split("/")[0] for n in names}
    check(len(top) == 1, f"the zip holds one folder: {sorted(top)}")
    folder = os.path.join(prefix, "drive_c", sorted(top)[0])
    for name in ("dmlserve.exe", "dmlserve-cli.exe", "install-dmlserve.ps1", "README.txt",
                 "windows.md", "licenses/source-packages.txt"):
        check(os.path.isfile(os.path.join(folder, name)), f"the zip has {name}")
    licenses = os.listdir(os.path.join(folder, "licenses"))
    for package in ("grpc", "protobuf", "abseil", "openssl", "prometheus-cpp", "civetweb",
                    "c-ares", "re2", "zlib", "directx-headers", "mingw-w64"):
        check(f"{package}.copyright" in licenses, f"licenses/{package}.copyright")
    for exe in ("dmlserve.exe", "dmlserve-cli.exe"):
        dlls = imported_dlls(os.path.join(folder, exe))
        check(dlls <= SYSTEM_DLLS, f"{exe} needs only Windows' own DLLs: "
                    f"{sorted(dlls - SYSTEM_DLLS) or sorted(dlls)}")
    version = run_wine(env, os.path.join(folder, "dmlserve.exe"), "--version")
    check(version.returncode == 0 and "dmlserve" in version.stdout,
                f"dmlserve.exe --version runs under wine: {version.stdout.strip()!r} "
                f"{version.stderr.strip()[-300:]!r}")
    # Wine's own processes from here on outlive each test's (their output
    # pipes are not held open by a wineserver a test started).
    subprocess.run([WINESERVER, "-p"], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return check.exit_code()


def cleanup(prefix):
    subprocess.run([WINESERVER, "-k"], env=wine_env(prefix), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    stop_xvfb(prefix)
    return 0


if __name__ == "__main__":
    verb, zip_path, prefix = sys.argv[1:4]
    sys.exit(setup(zip_path, prefix) if verb == "setup" else cleanup(prefix))
