#!/usr/bin/python3
"""dmlserve.exe under wine, from both sides' command-line clients.

    windows_clients_test.py LINUX_DMLSERVE_CLI

Starts dmlserve.exe (DMLSERVE_WINDOWS_EXE, under wine through
DMLSERVE_BINARY=wine_dmlserve.sh) on the CPU backend and asserts:
  - the Linux dmlserve-cli (the C++ client library) gets SERVING, the
    server's info, and every conformance case answered as expected
    (`run --check`); a bad request gets exit code 2 and the field's name;
  - dmlserve-cli.exe, under wine, does the same against it;
  - /metrics (prometheus-cpp's exposer in the exe) counts those requests.
Then the same conformance run on the D3D12 backend (wine's d3d12 over vkd3d
and lavapipe).
"""

import glob
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from server_process import ServerProcess  # noqa: E402
from wine_support import Checks, run_wine, wine_env  # noqa: E402

LINUX_CLI = sys.argv[1]
WINDOWS_EXE = os.environ["DMLSERVE_WINDOWS_EXE"]
WINDOWS_CLI = os.path.join(os.path.dirname(WINDOWS_EXE), "dmlserve-cli.exe")
CONFORMANCE = sorted(glob.glob(os.path.join(os.environ["DMLSERVE_CONFORMANCE_DIR"], "*.json")))
ENV = wine_env(os.environ["WINEPREFIX"])
check = Checks()


def linux_cli(*args):
    return subprocess.run([LINUX_CLI, *args], capture_output=True, text=True, timeout=300)


def windows_cli(*args):
    result = run_wine(ENV, WINDOWS_CLI, *args, timeout=300)
    if result.returncode != 0 and not result.stdout.strip() and not result.stderr.strip():
        # dmlserve-cli.exe says why on every failure (even a crash: its
        # unhandled-exception filter), so a failure without a word is wine's:
        # once, on a cold CI machine starting other wine suites at -j2, the
        # process never got to run. Run it once more with wine's own errors
        # shown, and say so.
        print(f"NOTE wine ran dmlserve-cli.exe {' '.join(args)} to exit {result.returncode} with "
              "no output; once more, with WINEDEBUG=err+all", flush=True)
        result = run_wine(dict(ENV, WINEDEBUG="err+all,fixme-all"), WINDOWS_CLI, *args,
                          timeout=300)
    return result


def cli_checks(label, cli, address):
    health = cli(f"--server={address}", "health")
    check(health.returncode == 0 and "SERVING" in health.stdout,
          f"{label}: health is SERVING ({health.returncode}: {health.stdout.strip()} "
          f"{health.stderr.strip()[-200:]})")
    info = cli(f"--server={address}", "info")
    check(info.returncode == 0 and "version" in info.stdout and "cumulative" in info.stdout.lower(),
          f"{label}: info names the version and operators ({info.returncode}: "
          f"{info.stdout.strip()[:200]})")
    for path in CONFORMANCE:
        run = cli(f"--server={address}", "run", "--check", path)
        check(run.returncode == 0, f"{label}: every case of {os.path.basename(path)} as expected "
              f"({run.returncode}: {run.stderr.strip()[-300:]})")
    bad = cli(f"--server={address}", "cumsum", "--sizes=1,1,2,2", "--values=1,2,3", "--axis=3")
    check(bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr and "data" in bad.stderr,
          f"{label}: 3 values for 4 elements is INVALID_ARGUMENT naming the field "
          f"({bad.returncode}: {bad.stderr.strip()[-300:]})")
    axis = cli(f"--server={address}", "cumsum", "--sizes=1,1,2,2", "--values=1,2,3,4", "--axis=7")
    check(axis.returncode == 2 and "axis" in axis.stderr,
          f"{label}: axis 7 of a 4-d tensor is refused, naming the axis "
          f"({axis.returncode}: {axis.stderr.strip()[-300:]})")


def metric_sum(text, name, **labels):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
    return total


def main():
    with ServerProcess(os.environ["DMLSERVE_BINARY"], extra_args=["--backend=cpu"],
                       startup_timeout=180) as server:
        address = server.grpc_address
        cli_checks("Linux dmlserve-cli", linux_cli, address)
        cli_checks("dmlserve-cli.exe under wine", windows_cli, address)
        with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=30) as r:
            content_type = r.headers.get("Content-Type", "")
            metrics = r.read().decode()
        check(content_type.startswith("text/plain"), f"/metrics is Prometheus text: {content_type}")
        ok = metric_sum(metrics, "dmlserve_requests_total", code="OK")
        bad = metric_sum(metrics, "dmlserve_requests_total", code="INVALID_ARGUMENT")
        check(ok >= 2 * len(CONFORMANCE) and bad >= 2,
              f"/metrics counts the requests: {ok:.0f} OK, {bad:.0f} INVALID_ARGUMENT")
        check(re.search(r'^dmlserve_build_info\{version="[^"]+"\} 1', metrics, re.M) is not None,
              "/metrics has dmlserve_build_info with the version")
        code = server.stop()
        check(code == 0, f"Ctrl+C (SIGTERM through wine) drains and exits 0: {code}\n" +
              "".join(server.output[-10:]))

    with ServerProcess(os.environ["DMLSERVE_BINARY"], extra_args=["--backend=d3d12", "--placement=gpu_first"],
                       startup_timeout=180) as server:
        for path in CONFORMANCE:
            run = linux_cli(f"--server={server.grpc_address}", "run", "--check", path)
            check(run.returncode == 0, f"D3D12 backend: every case of {os.path.basename(path)} "
                  f"as expected ({run.returncode}: {run.stderr.strip()[-300:]})")
        info = linux_cli(f"--server={server.grpc_address}", "info")
        check("d3d12" in info.stdout.lower(), f"D3D12 backend: info lists a D3D12 device: "
              f"{info.stdout.strip()[:300]}")
        check(server.stop() == 0, "D3D12 server drains and exits 0")

    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
