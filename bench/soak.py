#!/usr/bin/python3
"""Soak test: a dmlserve server under everything at once for a while, with its resources
compared at the start and the end.

Runs, side by side, for --minutes (default 10):
  - mixed load: cumulative sums and products and quantized matmuls (inline and registered B),
    unary and streamed, every answer checked;
  - register/release churn: tensors registered, used and released again;
  - stream cancellations: streams cancelled with items still in flight;
  - slow /metrics clients: connections that trickle a request header and never finish it,
    while a scraper reads /metrics every second.
After a warm-up it samples the server's resident memory, open file descriptors and device
memory (dmlserve_device_memory_bytes), once a minute, and at the end; each must end within 5%
of where it started. Prints them and exits non-zero otherwise or on any wrong answer. Run through bench/soak.sh (it sets PYTHONPATH).
"""

import argparse
import os
import random
import socket
import sys
import threading
import time
import urllib.request

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

from dmlserve_client import Client, DmlserveError, numpy_from_tensor, tensor_ref  # noqa: E402
from server_process import ServerProcess  # noqa: E402


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def sample(server, pid):
    text = urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10).read()
    device_bytes = sum(float(line.split()[-1]) for line in text.decode().splitlines()
                       if line.startswith("dmlserve_device_memory_bytes"))
    return {"rss": proc_status(pid, "VmRSS"), "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "device_memory": device_bytes}


class Soak:
    def __init__(self, server, seconds):
        self.server = server
        self.deadline = time.monotonic() + seconds
        self.errors = []
        self.counts = {}
        self.lock = threading.Lock()

    def running(self):
        return time.monotonic() < self.deadline

    def count(self, what):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, what):
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(what)

    def mixed_load(self, seed):
        rng = np.random.default_rng(seed)
        with Client(self.server.grpc_address, timeout=60) as client:
            while self.running():
                kind = rng.integers(4)
                try:
                    if kind == 0:
                        x = rng.integers(-50, 50, size=(4, 33)).astype(np.float32)
                        got = client.cumsum(x, axis=1)
                        if not np.array_equal(got, np.cumsum(x, axis=1)):
                            self.fail("cumsum answer wrong")
                    elif kind == 1:
                        x = rng.integers(1, 4, size=(3, 7)).astype(np.uint32)
                        got = client.cumprod(x, axis=1)
                        if not np.array_equal(got, np.cumprod(x, axis=1).astype(np.uint32)):
                            self.fail("cumprod answer wrong")
                    elif kind == 2:
                        a = rng.integers(0, 16, size=(5, 8)).astype(np.uint8)
                        b = rng.integers(0, 16, size=(8, 3)).astype(np.uint8)
                        got = client.qmatmul(a, 1.0, b, 1.0, 64.0, output_zero_point=np.uint8(0))
                        want = np.clip(np.rint((a.astype(np.int64) @ b) / 64.0), 0, 255)
                        if not np.array_equal(got, want.astype(np.uint8)):
                            self.fail("qmatmul answer wrong")
                    else:
                        x = rng.integers(-9, 9, size=(2, 5)).astype(np.float32)
                        replies = client.stream([Client.cumsum_request(x, axis=0)
                                                 for _ in range(8)])
                        if any(not np.array_equal(_output(r), np.cumsum(x, axis=0))
                               for r in replies):
                            self.fail("stream answer wrong")
                    self.count("requests")
                except DmlserveError as error:
                    self.fail(f"request failed: {error}")

    def churn(self):
        rng = np.random.default_rng(7)
        with Client(self.server.grpc_address, timeout=60) as client:
            n = 0
            while self.running():
                b = rng.integers(0, 16, size=(64, 32)).astype(np.uint8)
                tensor_id = f"soak-{n}"
                n += 1
                try:
                    client.register(b, tensor_id=tensor_id)
                    a = rng.integers(0, 16, size=(2, 64)).astype(np.uint8)
                    got = client.qmatmul(a, 1.0, tensor_ref(tensor_id), 1.0, 256.0,
                                         output_zero_point=np.uint8(0))
                    want = np.clip(np.rint((a.astype(np.int64) @ b) / 256.0), 0, 255)
                    if not np.array_equal(got, want.astype(np.uint8)):
                        self.fail("registered qmatmul answer wrong")
                    client.release(tensor_id)
                    self.count("register/release")
                except DmlserveError as error:
                    self.fail(f"churn failed: {error}")

    def cancellations(self):
        channel = grpc.insecure_channel(self.server.grpc_address)
        from dmlserve.v1 import dmlserve_pb2_grpc
        stub = dmlserve_pb2_grpc.OperatorServiceStub(channel)
        x = np.ones((256, 1024), dtype=np.float32)
        while self.running():
            requests = iter([Client.cumsum_request(x, axis=1, request_id=str(i))
                             for i in range(32)])
            call = stub.ExecuteStream(requests, timeout=60)
            try:
                next(call)
            except (grpc.RpcError, StopIteration):
                pass
            call.cancel()
            self.count("streams cancelled")
        channel.close()

    def slow_metrics_clients(self):
        host, port = self.server.metrics_address.rsplit(":", 1)
        header = b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: "
        while self.running():
            try:
                with socket.create_connection((host, int(port)), timeout=5) as s:
                    for i in range(200):
                        if not self.running():
                            break
                        s.send(header[i:i + 1] if i < len(header) else b"x")
                        time.sleep(0.3)
            except OSError:
                self.count("slow clients cut off")

    def scraper(self):
        while self.running():
            try:
                urllib.request.urlopen(f"http://{self.server.metrics_address}/metrics",
                                       timeout=10).read()
                self.count("scrapes")
            except OSError as error:
                self.fail(f"scrape failed: {error}")
            time.sleep(1)


def _output(response):
    return numpy_from_tensor(response.output)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server_binary", default=os.path.join(HERE, "..", "build", "server",
                                                                "dmlserve"))
    parser.add_argument("--minutes", type=float, default=10)
    # Long enough for the buffer pools and caches to reach their working size.
    parser.add_argument("--warmup_seconds", type=float, default=120)
    args = parser.parse_args()

    server = ServerProcess(args.server_binary)
    pid = server.pid
    soak = Soak(server, args.warmup_seconds + args.minutes * 60)
    workers = [threading.Thread(target=soak.mixed_load, args=(seed,)) for seed in range(4)]
    workers += [threading.Thread(target=soak.churn), threading.Thread(target=soak.cancellations),
                threading.Thread(target=soak.scraper)]
    workers += [threading.Thread(target=soak.slow_metrics_clients) for _ in range(6)]
    for worker in workers:
        worker.start()
    time.sleep(args.warmup_seconds)
    start = sample(server, pid)
    print(f"soak: start  rss {start['rss'] / 2**20:.1f} MiB, fds {start['fds']}, "
          f"device memory {start['device_memory'] / 2**20:.1f} MiB", flush=True)
    # A line a minute: a leak climbs, a warm-up settles.
    while soak.running():
        time.sleep(min(60, max(0.1, soak.deadline - time.monotonic())))
        now = sample(server, pid)
        print(f"soak:        rss {now['rss'] / 2**20:.1f} MiB, fds {now['fds']}, "
              f"device memory {now['device_memory'] / 2**20:.1f} MiB", flush=True)
    for worker in workers:
        worker.join()
    time.sleep(2)  # the last calls' memory is back in the pools
    end = sample(server, pid)
    print(f"soak: end    rss {end['rss'] / 2**20:.1f} MiB, fds {end['fds']}, "
          f"device memory {end['device_memory'] / 2**20:.1f} MiB", flush=True)
    print("soak: " + ", ".join(f"{n} {what}" for what, n in sorted(soak.counts.items())))
    exit_code = server.stop()
    problems = list(soak.errors)
    if end["rss"] > start["rss"] * 1.05:
        problems.append("resident memory grew by more than 5%")
    if end["fds"] > start["fds"] * 1.05 + 1:
        problems.append("file descriptors grew by more than 5%")
    if end["device_memory"] > start["device_memory"] * 1.05 + 1:
        problems.append("device memory grew by more than 5%")
    if exit_code != 0:
        problems.append(f"server exited {exit_code}")
    for problem in problems:
        print(f"soak: FAIL: {problem}")
    print(f"soak: {'ok' if not problems else 'failed'} after {args.minutes:g} min")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
