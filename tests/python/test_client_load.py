"""Concurrent load from many client threads: every response is correct, and the server's
/metrics shows the dynamic batcher grouped requests (dmlserve_batch_size above 1)."""

import re
import threading
import unittest
import urllib.request

import numpy as np

from client_test_support import ServerTestCase, reference_scan
from dmlserve_client import Client

THREADS = 16
REQUESTS_PER_THREAD = 25

_BUCKET = re.compile(r'^dmlserve_batch_size_bucket\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$')
_COUNT = re.compile(r'^dmlserve_batch_size_count(\{[^}]*\})?\s+(?P<value>\S+)$')


def batches_larger_than_one(metrics_text):
    """Observations of dmlserve_batch_size above 1, summed over label sets."""
    total, at_most_one = 0.0, 0.0
    for line in metrics_text.splitlines():
        match = _COUNT.match(line)
        if match:
            total += float(match.group("value"))
            continue
        match = _BUCKET.match(line)
        if match and re.search(r'le="1(\.0)?"', match.group("labels")):
            at_most_one += float(match.group("value"))
    return total, total - at_most_one


class LoadTest(ServerTestCase):
    # An idle device takes each job at once (these small scans run on the thread
    # that received them), so batches form only while the device is busy: every
    # batch here takes an injected 2 ms more, so that jobs arriving meanwhile
    # queue and the batcher groups them.
    SERVER_ARGS = ("--cpu_devices=1",)
    SERVER_ENV = {"DMLSERVE_INJECT_BATCH_DELAY_US": "2000"}

    def test_many_threads_all_correct_and_batched(self):
        failures = []
        batch_sizes = []
        lock = threading.Lock()
        start = threading.Barrier(THREADS)

        def worker(seed):
            rng = np.random.default_rng(seed)
            with Client(self.server.grpc_address, timeout=120) as client:
                start.wait()
                for i in range(REQUESTS_PER_THREAD):
                    # Same shape and type for every thread, so the jobs are compatible.
                    x = rng.integers(-1000, 1000, size=(4, 64)).astype(np.int32)
                    try:
                        response = client.execute(Client.cumsum_request(
                            x, axis=1, request_id=f"{seed}-{i}"))
                        got = np.frombuffer(response.output.data, "<i4").reshape(4, 64)
                        if response.request_id != f"{seed}-{i}":
                            raise AssertionError(f"request_id {response.request_id}")
                        np.testing.assert_array_equal(got, reference_scan(x, 1, False, False,
                                                                          False))
                        with lock:
                            batch_sizes.append(response.info.batch_size)
                    except Exception as error:  # Collected and reported below.
                        with lock:
                            failures.append(f"{seed}-{i}: {error!r}")

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(failures, [])
        self.assertEqual(len(batch_sizes), THREADS * REQUESTS_PER_THREAD)

        with urllib.request.urlopen(f"http://{self.server.metrics_address}/metrics",
                                    timeout=60) as reply:
            metrics = reply.read().decode()
        total, batched = batches_larger_than_one(metrics)
        self.assertGreater(total, 0, "no dmlserve_batch_size observations:\n" + metrics[:2000])
        self.assertGreater(batched, 0, "every batch held one request")
        # The responses' own ExecutionInfo agrees.
        self.assertGreater(max(batch_sizes), 1)


if __name__ == "__main__":
    unittest.main()
