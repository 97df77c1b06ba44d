#!/usr/bin/python3
"""dmlserve's Windows service layer under wine's Service Control Manager.

Runs dmlserve_engine_service.exe (engine_service_host.cc: the product's
server/platform service code around the scheduler with its CPU and D3D12
devices) as a real service under wine's services.exe, and asserts:

  sc create / sc query      the service exists and is STOPPED;
  sc start                  START_PENDING, then RUNNING once it serves;
                            work is served: conformance cases answered on
                            the CPU and the D3D12 device, checked bit-exact;
  sc stop                   STOP_PENDING at once while work is in flight;
                            every request admitted before the stop is
                            answered correctly, then STOPPED, then the
                            process is gone (work finished before it exited);
  sc delete                 the service is gone.
Then the product's own command set on the same executable:
  service install           the service with its virtual account, delayed
                            auto-start, restart actions, pre-shutdown timeout
                            and event log source (read back from the
                            registry);
  service start/stop        wait for RUNNING / for the drain and STOPPED;
  service uninstall         the service and its event log source removed;
  a start-up failure        `service start` fails with the server's exit
                            code, and the error is logged;
  service run from a console fails with a clear message.

    windows_service_test.py <exe> <conformance dir> <work dir>

Needs wine64 and an X display (D3D12 under wine): run under xvfb-run.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

EXE, CONFORMANCE, WORK = (os.path.abspath(a) for a in sys.argv[1:4])
WINE = shutil.which("wine64") or "/usr/lib/wine/wine64"
ENV = dict(os.environ, WINEPREFIX=os.path.join(WORK, "wineprefix"), WINEDEBUG="-all",
           WINEDLLOVERRIDES="mscoree,mshtml=")
NAME = "dmlserve-wine-test"
STATES = {1: "STOPPED", 2: "START_PENDING", 3: "STOP_PENDING", 4: "RUNNING"}
BATCH_DELAY_MS = 1500  # each batch waits this long: work stays in flight

failures = []


def check(condition, what):
    print(("PASS " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)
    return condition


def windows_path(path):
    return "Z:" + path.replace("/", "\\")


def wine(*args, timeout=120):
    """Runs a wine command; its output through files, not pipes: processes
    wine starts on the way (wineserver, services) inherit them and would keep
    a pipe open for ever."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        result = subprocess.run([WINE, *args], env=ENV, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, timeout=timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(result.args, result.returncode, out.read(), err.read())


def sc(*args, timeout=180):
    """wine's sc.exe. Now and then it fails to reach services.exe at all
    (wine's RPC: RPC_S_SERVER_UNAVAILABLE, no output, exit code 1), so such
    a failure is tried again a few times before it counts."""
    for _ in range(5):
        result = wine("sc", *args, timeout=timeout)
        if result.returncode == 0 or result.stdout.strip() or result.stderr.strip():
            break
        time.sleep(0.5)
    return result


def state(name=NAME):
    """The service's state name, or None when it does not exist."""
    result = sc("query", name)
    match = re.search(r"STATE\s*:\s*(\d+)", result.stdout)
    return STATES.get(int(match.group(1)), match.group(1)) if match else None


def wait_for_state(wanted, timeout, name=NAME, log=None):
    """The states seen until `wanted`, or until the service logged its stop."""
    seen = []
    start = time.time()
    while time.time() < start + timeout:
        current = state(name)
        if not seen or seen[-1] != current:
            seen.append(current)
        if current == wanted:
            return seen
        if log and any("service stopped" in line for line in log_lines(log)):
            return seen + [state(name)]
        time.sleep(0.2)
    return seen


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conformance_count():
    # As LoadConformanceCases orders them: files by name, cases in order.
    import json
    count = 0
    for name in sorted(os.listdir(CONFORMANCE)):
        if name.endswith(".json"):
            with open(os.path.join(CONFORMANCE, name)) as f:
                count += len(json.load(f)["cases"])
    return count


def connect(port, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def read_answers(sock, count):
    """Up to `count` answer lines; fewer when the server hung up."""
    data = b""
    while data.count(b"\n") < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.decode().splitlines()


def service_processes():
    out = subprocess.run(["pgrep", "-f", "engine_service.exe service run"], capture_output=True,
                         text=True).stdout
    return out.split()


def log_lines(log):
    return open(log).read().splitlines() if os.path.exists(log) else []


def host_flags(port, log, conformance=CONFORMANCE, backend="cpu+d3d12"):
    return [f"--port={port}", f"--conformance_dir={windows_path(conformance)}",
            f"--batch_delay_ms={BATCH_DELAY_MS}", f"--log_file={windows_path(log)}",
            f"--backend={backend}"]


def sc_lifecycle(cases):
    port = free_port()
    log = os.path.join(WORK, "sc_service.log")
    binpath = " ".join([windows_path(EXE), "service", "run", f"--service_name={NAME}",
                        *host_flags(port, log)])
    # Interactive: wine gives other services a window station without a
    # display driver, where D3D12 (wined3d's DXGI) is unsupported. Windows
    # itself runs D3D12 in any service.
    created = sc("create", NAME, "binpath=", binpath, "type=", "own", "type=", "interact")
    check(created.returncode == 0, f"sc create (rc {created.returncode}: {created.stdout.strip()})")
    check(state() == "STOPPED", "sc query after create: STOPPED")

    started = sc("start", NAME, timeout=180)
    check(started.returncode == 0,
          f"sc start (rc {started.returncode}: {started.stdout.strip()} {started.stderr.strip()})")
    seen = wait_for_state("RUNNING", 180, log=log)
    if not check(seen[-1:] == ["RUNNING"], f"sc query after start: {seen} ends RUNNING"):
        print("\n".join(log_lines(log)))
        sc("delete", NAME)
        return
    check(any("engine serving" in line for line in log_lines(log)),
          "the service logged that it serves")

    # Work while it runs: every case, pipelined so that batches form.
    devices = set()
    with connect(port) as sock:
        sock.sendall("".join(f"{i % cases}\n" for i in range(2 * cases)).encode())
        answers = read_answers(sock, 2 * cases)
    ok = [a for a in answers if a.startswith("ok ")]
    check(len(ok) == 2 * cases, f"served {len(ok)}/{2 * cases} cases correctly: "
          f"{[a for a in answers if not a.startswith('ok ')][:3]}")
    for answer in ok:
        devices.add(answer.split()[2])
    check(any(d.startswith("cpu") for d in devices) and any("d3d12" in d for d in devices),
          f"both the CPU and the D3D12 device served: {sorted(devices)}")

    # Stop while work is in flight: three clients, requests admitted and
    # waiting in their batches when the stop arrives.
    clients = [connect(port) for _ in range(3)]
    per_client = 4
    for n, sock in enumerate(clients):
        sock.sendall("".join(f"{(n * per_client + i) % cases}\n"
                             for i in range(per_client)).encode())
    time.sleep(0.5)
    stop_at = time.time()
    stopped = sc("stop", NAME)
    check(stopped.returncode == 0, f"sc stop (rc {stopped.returncode})")
    check("STOP_PENDING" in stopped.stdout or state() == "STOP_PENDING",
          "STOP_PENDING while the work in flight drains")
    answers = []
    for sock in clients:
        answers += read_answers(sock, per_client)
    answered_at = time.time()
    ok = [a for a in answers if a.startswith("ok ")]
    check(len(ok) == 3 * per_client,
          f"every request in flight at the stop finished correctly ({len(ok)}/{3 * per_client}, "
          f"{answered_at - stop_at:.1f} s after sc stop): {[a for a in answers if not a.startswith('ok ')][:3]}")
    check(all(sock.recv(1) == b"" for sock in clients),
          "then the service closed the connections")
    for sock in clients:
        sock.close()
    seen = wait_for_state("STOPPED", 60)
    check(seen[-1:] == ["STOPPED"], f"sc query after stop: {seen} ends STOPPED")
    deadline = time.time() + 30
    while service_processes() and time.time() < deadline:
        time.sleep(0.2)
    check(not service_processes(), "the service process exited")
    lines = log_lines(log)
    drained = [i for i, line in enumerate(lines) if "drained: every admitted request" in line]
    stopped_line = [i for i, line in enumerate(lines) if "engine stopped" in line]
    check(bool(drained) and bool(stopped_line) and drained[-1] < stopped_line[-1],
          "the log shows the drain finishing before the engine stopped")
    check(any("service STOP, draining" in line for line in lines), "the log names the STOP")

    deleted = sc("delete", NAME)
    check(deleted.returncode == 0, f"sc delete (rc {deleted.returncode})")
    check(state() is None, "sc query after delete: no such service")


def registry_value(key, value):
    result = wine("reg", "query", key, "/v", value)
    match = re.search(rf"{re.escape(value)}\s+(REG_\w+)\s+(.*)", result.stdout)
    return match.group(2).strip() if match else None


def product_commands(cases):
    # The CPU device only: `service install` makes an ordinary (not
    # interactive) service, and wine gives those no display for D3D12.
    name = "dmlserve-installed"
    port = free_port()
    log = os.path.join(WORK, "installed_service.log")
    check(state(name) is None, f"no service {name} before the install: {state(name)}")
    installed = wine(EXE, "service", "install", f"--service_name={name}", *host_flags(port, log, backend="cpu"))
    check(installed.returncode == 0,
          f"service install (rc {installed.returncode}: {installed.stderr.strip()[-300:]})")
    key = f"HKLM\\System\\CurrentControlSet\\Services\\{name}"
    check(registry_value(key, "ObjectName") == f"NT SERVICE\\{name}",
          f"runs as the virtual account NT SERVICE\\{name}: {registry_value(key, 'ObjectName')}")
    check(registry_value(key, "Start") == "0x2", "starts automatically")
    # Wine's service manager lacks delayed auto-start (ERROR_INVALID_LEVEL):
    # the installer then warns and installs without it.
    check(registry_value(key, "DelayedAutostart") == "0x1" or
          "does not support delayed auto-start" in installed.stderr,
          "delayed auto-start, or a warning where the service manager lacks it")
    check(registry_value(key, "PreshutdownTimeout") == hex(40000),
          f"pre-shutdown timeout covers the drain: {registry_value(key, 'PreshutdownTimeout')}")
    image = registry_value(key, "ImagePath") or ""
    check("service run" in image and f"--service_name={name}" in image and f"--port={port}" in image,
          f"command line keeps the server flags: {image}")
    source = f"HKLM\\System\\CurrentControlSet\\Services\\EventLog\\Application\\{name}"
    check(registry_value(source, "EventMessageFile") == windows_path(EXE),
          "event log source registered, the executable as its message file")
    again = wine(EXE, "service", "install", f"--service_name={name}", *host_flags(port, log, backend="cpu"))
    check(again.returncode != 0 and "ALREADY_EXISTS" in again.stderr,
          "installing twice fails clearly")

    started = wine(EXE, "service", "start", f"--service_name={name}", timeout=240)
    if not check(started.returncode == 0 and state(name) == "RUNNING",
                 f"service start waits until RUNNING (rc {started.returncode}: "
                 f"{started.stderr.strip()[-300:]})"):
        print("\n".join(log_lines(log)))
        wine(EXE, "service", "uninstall", f"--service_name={name}")
        return
    with connect(port) as sock:
        sock.sendall(b"0\n1\n")
        answers = read_answers(sock, 2)
    check(len([a for a in answers if a.startswith("ok ")]) == 2, f"served: {answers}")
    with connect(port) as sock:
        sock.sendall(b"2\n3\n")
        time.sleep(0.5)
        stopped = wine(EXE, "service", "stop", f"--service_name={name}", timeout=120)
        answers = read_answers(sock, 2)
    check(stopped.returncode == 0 and state(name) == "STOPPED",
          f"service stop waits for the drain and STOPPED (rc {stopped.returncode})")
    check(len([a for a in answers if a.startswith("ok ")]) == 2,
          f"work in flight at `service stop` finished: {answers}")
    removed = wine(EXE, "service", "uninstall", f"--service_name={name}")
    check(removed.returncode == 0 and state(name) is None, "service uninstall removes it")
    check(registry_value(source, "EventMessageFile") is None, "and its event log source")

    # A start-up failure: the error reaches the log and `service start`.
    bad_log = os.path.join(WORK, "failing_service.log")
    wine(EXE, "service", "install", f"--service_name={name}",
         *host_flags(port, bad_log, conformance=os.path.join(WORK, "no-such-dir"), backend="cpu"))
    failed = wine(EXE, "service", "start", f"--service_name={name}", timeout=240)
    check(failed.returncode != 0 and "exit code 1" in failed.stderr,
          f"a service that fails at start-up: `service start` says so: {failed.stderr.strip()[-300:]}")
    check(any(line.startswith("E ") and "--conformance_dir" in line
              for line in log_lines(bad_log)), "and the server's error was logged")
    wine(EXE, "service", "uninstall", f"--service_name={name}")

    console = wine(EXE, "service", "run")
    check(console.returncode != 0 and "Service Control Manager" in console.stderr,
          "`service run` from a console fails with a clear message")
    bad = wine(EXE, "service", "launch")
    check(bad.returncode == 2 and "unknown verb" in bad.stderr, "an unknown verb is refused")


def main():
    os.makedirs(WORK, exist_ok=True)
    wineserver = ["/usr/lib/wine/wineserver"]
    subprocess.run(wineserver + ["-k"], env=ENV, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    # A fresh prefix: services left installed by an earlier run would start
    # with it (auto-start) and hold their ports.
    shutil.rmtree(ENV["WINEPREFIX"], ignore_errors=True)
    for log in ("sc_service.log", "installed_service.log", "failing_service.log"):
        if os.path.exists(os.path.join(WORK, log)):
            os.remove(os.path.join(WORK, log))
    # Create the prefix and let everything wine started for it finish (its
    # first boot goes on in the background after wineboot returns).
    wine("wineboot", "-i", timeout=300)
    subprocess.run(wineserver + ["-w"], env=ENV, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=300)
    # An ordinary process for the whole test (cmd.exe reading a pipe we keep
    # open): once none is left (say between two sc commands) wine shuts down
    # services.exe and every service with it, as Windows does when the last
    # session ends.
    keeper = subprocess.Popen([WINE, "cmd"], env=ENV, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The service manager answers once a probe service shows.
    sc("create", "dmlserve-probe", "binpath=", "C:\\probe.exe")
    deadline = time.time() + 120
    while state("dmlserve-probe") is None and time.time() < deadline:
        time.sleep(0.5)
    sc("delete", "dmlserve-probe")
    cases = conformance_count()
    try:
        sc_lifecycle(cases)
        product_commands(cases)
    finally:
        keeper.stdin.close()
        subprocess.run(wineserver + ["-k"], env=ENV, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    print(f"{'ALL PASSED' if not failures else 'FAILED'} ({len(failures)} failed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
