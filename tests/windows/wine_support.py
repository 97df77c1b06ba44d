"""What the Windows tests share: wine's programs and how to run them."""

import os
import re
import shutil
import subprocess
import tempfile
import time

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


class WineSession:
    """A prefix's wine, kept running and watched for the whole test.

    The keeper is an ordinary wine process (cmd.exe reading a pipe kept open),
    as a user's console would be: once no ordinary process is left, wine
    shuts down services.exe and every service with it, as Windows does when
    the last session ends. `lost()` says when wine itself went away under the
    test: its wineserver gone (a crash or a SIGKILL loses what the registry
    got since its last save, services installed included) or the keeper
    exited. Nothing the test or the product does ends either, so then the
    checks that follow test wine's restart, not dmlserve."""

    def __init__(self, prefix, env, log=None):
        self.prefix = prefix
        self.log = log
        self.keeper = subprocess.Popen([WINE, "cmd"], env=env, stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL,
                                       stderr=open(log, "w") if log else subprocess.DEVNULL)
        self.server = None
        deadline = time.time() + 60
        while self.server is None and time.time() < deadline:
            found = prefix_processes(prefix, "wineserver64")
            self.server = found[0] if found else None
            time.sleep(0.1)

    def lost(self):
        """Why wine's session ended under the test; None while it runs."""
        reasons = []
        if self.keeper.poll() is not None:
            reasons.append(f"the keeper (wine cmd) exited with {self.keeper.returncode}")
        if self.server is None:
            reasons.append("no wineserver was found for the prefix")
        elif not _running(self.server):
            reasons.append(f"its wineserver (pid {self.server}) is gone")
        return "; ".join(reasons) or None

    def report_loss(self, reason):
        """Prints what is known about why wine went away: the log the keeper
        (and so the wineserver, which says "wineserver crashed" there) wrote
        to, and what the kernel said about wine's processes, where readable."""
        print(f"NOTE wine's session ended under the test: {reason}", flush=True)
        if self.log and os.path.exists(self.log):
            with open(self.log, errors="replace") as log:
                tail = log.read().splitlines()[-30:]
            print("NOTE the last lines wine wrote to its log:\n  " + "\n  ".join(tail))
        kernel = subprocess.run(["dmesg"], capture_output=True, text=True)
        if kernel.returncode == 0:
            lines = [line for line in kernel.stdout.splitlines()
                     if re.search(r"wine|oom|killed process", line, re.I)]
            print("NOTE the kernel's log about wine and memory:\n  " +
                  "\n  ".join(lines[-10:] or ["(nothing)"]), flush=True)

    def close(self):
        if self.lost():
            # What ran on a wineserver that is gone waits for it for ever (the
            # service, the keeper): none of it can end by itself, and a next
            # attempt in the same prefix would count it as its own.
            for pid in prefix_processes(self.prefix, "."):
                subprocess.run(["kill", "-9", pid], stderr=subprocess.DEVNULL)
        self.keeper.stdin.close()
        try:
            self.keeper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.keeper.kill()


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Checks:
    """A test's checks: one PASS or FAIL line each, and the exit code."""

    def __init__(self):
        self.failures = []

    def __call__(self, condition, what):
        print(("PASS " if condition else "FAIL ") + what, flush=True)
        if not condition:
            self.failures.append(what)
        return condition

    def start_over(self, why):
        """Forgets the failures so far: the test runs its scenario again."""
        print(f"NOTE {len(self.failures)} failed check(s) above do not count ({why}): "
              "the scenario runs again from a new prefix", flush=True)
        self.failures = []

    def exit_code(self):
        print(f"{'ALL PASSED' if not self.failures else 'FAILED'} ({len(self.failures)} failed)")
        return 1 if self.failures else 0
