"""Starts the real dmlserve binary on free loopback ports for a test.

The server prints one line per listening endpoint at start-up:
  dmlserve: serving gRPC on 127.0.0.1:PORT
  dmlserve: serving metrics on http://127.0.0.1:PORT/metrics
and exits 0 after SIGTERM once queued work is finished.
"""

import os
import re
import signal
import subprocess
import threading
import time

_GRPC_LINE = re.compile(r"serving gRPC on (\S+)")
_METRICS_LINE = re.compile(r"serving metrics on http://(\S+)/metrics")


class ServerProcess:
    def __init__(self, binary, extra_args=(), startup_timeout=60.0, extra_env=None):
        # CTest runs the same suites once per backend through
        # DMLSERVE_SERVER_ARGS; a test's own flags come after, so they win.
        backend_args = os.environ.get("DMLSERVE_SERVER_ARGS", "").split()
        args = [binary, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0", *backend_args,
                *extra_args]
        env = dict(os.environ, **(extra_env or {}))
        if self._start(args, env, startup_timeout):
            return
        code = self._proc.wait(10)
        if not self.output and os.environ.get("DMLSERVE_WINDOWS_EXE"):
            # dmlserve.exe prints the reason for every start-up failure it
            # sees, so an exit without a word under wine is most likely
            # wine's: twice, with two wine suites starting at once at -j2, a
            # process never got to run (docs/windows.md, "A process that never
            # runs"). Start it once more with wine's own errors shown (a crash
            # is then reported), and say so.
            print(f"NOTE wine ran dmlserve.exe to exit {code} with no output; once more, "
                  "with WINEDEBUG=err+all", flush=True)
            if self._start(args, dict(env, WINEDEBUG="err+all,fixme-all"), startup_timeout):
                return
            code = self._proc.wait(10)
        raise RuntimeError(f"dmlserve exited at start-up (exit code {code}):\n" +
                           "".join(self.output))

    def _start(self, args, env, startup_timeout):
        """Starts the server; True once it has printed both addresses, False
        if it exited before (raises if it did neither in time)."""
        self.output = []
        self.grpc_address = None
        self.metrics_address = None
        # A process group of its own, so that a kill reaches every process
        # of it: under wine the binary is a shell script whose child runs
        # dmlserve.exe, which a kill of the script alone would leave running
        # (and such leftovers have upset later wine tests).
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, bufsize=1, env=env, start_new_session=True)
        ready = threading.Event()

        def pump():
            for line in self._proc.stdout:
                self.output.append(line)
                m = _GRPC_LINE.search(line)
                if m:
                    self.grpc_address = m.group(1)
                m = _METRICS_LINE.search(line)
                if m:
                    self.metrics_address = m.group(1)
                if self.grpc_address and self.metrics_address:
                    ready.set()
            ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        deadline = time.monotonic() + startup_timeout
        while not ready.wait(0.1):
            if time.monotonic() > deadline:
                self._kill_group()
                raise RuntimeError("dmlserve did not start:\n" + "".join(self.output))
        return bool(self.grpc_address and self.metrics_address)

    @property
    def pid(self):
        return self._proc.pid

    def alive(self):
        return self._proc.poll() is None

    def _kill_group(self):
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill(self):
        """SIGKILL: the server dies at once, connections and calls cut off."""
        if self._proc.poll() is None:
            self._kill_group()

    def stop(self, timeout=60.0):
        """Sends SIGTERM (to the server alone: under wine the script turns it
        into Ctrl+C) and returns the exit code; SIGKILL to every process of
        the group after `timeout` seconds."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill_group()
            code = self._proc.wait()
        self._pump.join(5)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def server_binary():
    return os.environ.get("DMLSERVE_BINARY", "build/server/dmlserve")
