#!/usr/bin/python3
"""The zip's README.txt service steps under wine, exactly as a user types them.

    windows_service_steps_test.py ZIP LINUX_DMLSERVE_CLI WORK_DIR

Unlike windows.service (which boots its prefix, restarts the wineserver and
redirects services.exe's log before it installs anything), nothing here is
arranged for the test:
  - a new prefix made with `wine64 wineboot -i`, no X display, no
    WINEDLLOVERRIDES: wine 8 then runs *two* services.exe, each with its own
    service database (docs/windows.md, "Under wine");
  - the zip extracted into drive_c, the exe run by its Unix path from there;
  - one long-running wine process keeping the wineserver up, as a user's
    console would;
  - `service install`, `start`, `stop`, `uninstall` with the default name,
    each one's exit code and every line it prints checked; gRPC health
    SERVING from Linux while it runs; the port closed and the process gone
    after the stop; a second `uninstall` says the service does not exist.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wine_support import (WINESERVER, Checks, WineSession, prefix_processes,  # noqa: E402
                          run_wine)

ZIP, CLI, WORK = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
PREFIX = os.path.join(WORK, "prefix")
ENV = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WINEDLLOVERRIDES")}
ENV.update(WINEPREFIX=PREFIX, WINEDEBUG="-all")

check = Checks()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lines(result):
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def service_processes():
    return prefix_processes(PREFIX, "dmlserve.exe service run")


def port_open(port):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def attempt():
    """The steps in a new prefix; returns why wine's session ended under them,
    or None."""
    subprocess.run([WINESERVER, "-k"], env=ENV, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    booted = run_wine(ENV, "wineboot", "-i", timeout=300)
    check(booted.returncode == 0, f"wineboot -i made the prefix (rc {booted.returncode})")
    with zipfile.ZipFile(ZIP) as archive:
        archive.extractall(os.path.join(PREFIX, "drive_c"))
    exes = [os.path.join(root, name) for root, _, names in os.walk(os.path.join(PREFIX, "drive_c"))
            for name in names if name.lower() == "dmlserve.exe"]
    check(len(exes) == 1, f"the zip put one dmlserve.exe in drive_c: {exes}")
    exe = exes[0]
    managers = len(prefix_processes(PREFIX, r"system32\\services.exe"))
    print(f"wine runs {managers} services.exe in this prefix", flush=True)

    session = WineSession(PREFIX, ENV)
    try:
        steps(exe, managers)
    finally:
        lost = session.lost()
        session.close()
        for pid in service_processes():
            subprocess.run(["kill", "-9", pid], stderr=subprocess.DEVNULL)
        subprocess.run([WINESERVER, "-k"], env=ENV, stderr=subprocess.DEVNULL)
    if lost:
        session.report_loss(lost)
    return lost


def main():
    # As in windows_service_test.py: a run under which wine itself went away
    # says so and runs once more.
    for number in (1, 2):
        lost = attempt()
        if not lost or number == 2 or not check.failures:
            break
        check.start_over(f"wine's session ended under attempt {number}")
    return check.exit_code()


def steps(exe, managers):
    port, metrics_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"

    def service(*args):
        result = run_wine(ENV, exe, "service", *args, timeout=240)
        print(f"$ dmlserve.exe service {' '.join(args)}  -> exit {result.returncode}")
        for line in lines(result):
            print(f"  {line}")
        return result

    installed = service("install", f"--listen={address}",
                        f"--metrics_listen=127.0.0.1:{metrics_port}", "--backend=cpu")
    # Wine's manager lacks delayed auto-start and the non-crash failure flag:
    # the installer warns about each and installs without them. With two
    # services.exe (wine_service_managers.h) it first says it stopped one.
    out = lines(installed)
    duplicate = [line for line in out if line.startswith(f"dmlserve: wine runs {managers} "
                                                         "services.exe in this prefix")]
    check(len(duplicate) == (1 if managers > 1 else 0),
          f"install reports the second service manager it stopped, if any: {duplicate}")
    unexpected = [line for line in out if line not in duplicate and not line.startswith(
        "dmlserve: this Service Control Manager does not support ")]
    check(installed.returncode == 0 and unexpected == [
        "dmlserve: service dmlserve installed (account NT SERVICE\\dmlserve); start it with "
        "`service start`"], f"install: exit 0 and says so: {out}")
    after = len(prefix_processes(PREFIX, r"system32\\services.exe"))
    check(after == 1, f"one services.exe runs after the install: {after}")

    started = service("start")
    out = lines(started)
    check(started.returncode == 0 and out[-1:] == ["dmlserve: service dmlserve running"],
          f"start: exit 0, ends with `service dmlserve running`: {out[-3:]}")
    check(any(f"service: service running, serving gRPC on {address}" in line for line in out),
          "start relays the service's start-up line")
    check(all(line.startswith("dmlserve: ") for line in out), "start prints only its own lines")

    health = subprocess.run([CLI, f"--server={address}", "health"],
                            capture_output=True, text=True, timeout=120)
    check(health.returncode == 0 and health.stdout.strip() == "SERVING",
          f"gRPC health from Linux is SERVING ({health.returncode}: {health.stdout.strip()} "
          f"{health.stderr.strip()[-200:]})")

    stopped = service("stop")
    check(stopped.returncode == 0 and lines(stopped) == ["dmlserve: service dmlserve stopped"],
          f"stop: exit 0, `service dmlserve stopped`: {lines(stopped)}")
    deadline = time.time() + 30
    while (service_processes() or port_open(port)) and time.time() < deadline:
        time.sleep(0.2)
    check(not service_processes() and not port_open(port),
          "after the stop the service process is gone and its port closed")

    removed = service("uninstall")
    check(removed.returncode == 0 and lines(removed) == ["dmlserve: service dmlserve removed"],
          f"uninstall: exit 0, `service dmlserve removed`: {lines(removed)}")
    again = service("uninstall")
    check(again.returncode == 1 and re.search(r"NOT_FOUND: opening service dmlserve: .*1060",
                                              again.stderr) is not None,
          f"a second uninstall says the service does not exist: {lines(again)}")


if __name__ == "__main__":
    sys.exit(main())
