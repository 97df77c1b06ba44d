"""What the Windows tests share: wine's programs and how to run them."""

import os
import shutil
import subprocess
import tempfile

WINE = shutil.which("wine64") or "/usr/lib/wine/wine64"
WINESERVER = shutil.which("wineserver") or "/usr/lib/wine/wineserver"


def wine_env(prefix, debug="-all"):
    # No Mono/Gecko: their first-run install prompts could wait for ever.
    return dict(os.environ, WINEPREFIX=prefix, WINEDEBUG=debug,
                WINEDLLOVERRIDES="mscoree,mshtml=")


def windows_path(path):
    """A Linux path as Windows programs under wine see it (Z: is /)."""
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def prefix_processes(prefix, pattern):
    """PIDs of the processes of wine prefix `prefix` whose command line matches `pattern` (a
    pgrep -f regular expression). Tests of different prefixes run side by side: a bare pgrep
    would count the others' processes too."""
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    wanted = f"WINEPREFIX={prefix}".encode()
    mine = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if wanted in environ.read().split(b"\0"):
                    mine.append(pid)
        except OSError:
            pass  # gone meanwhile
    return mine


def run_wine(env, *args, timeout=120):
    """Runs a wine command to its end. Its output goes through files, not
    pipes: processes wine starts on the way (wineserver, services.exe) inherit
    them and would hold a pipe open for ever."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        result = subprocess.run([WINE, *args], env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, timeout=timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(result.args, result.returncode, out.read(), err.read())


class Checks:
    """A test's checks: one PASS or FAIL line each, and the exit code."""

    def __init__(self):
        self.failures = []

    def __call__(self, condition, what):
        print(("PASS " if condition else "FAIL ") + what, flush=True)
        if not condition:
            self.failures.append(what)
        return condition

    def exit_code(self):
        print(f"{'ALL PASSED' if not self.failures else 'FAILED'} ({len(self.failures)} failed)")
        return 1 if self.failures else 0
