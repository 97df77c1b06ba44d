"""The Python client over three replicas: calls round-robin (every server's metrics show a
share), register()/release() reach every replica, a stopped replica loses no call, and bad
targets are refused naming the part."""

import re
import socket
import threading
import time
import unittest
import urllib.request

import numpy as np

from client_test_support import reference_qmatmul
from dmlserve_client import Client, DmlserveError, tensor_ref
from fake_dns_server import FakeDnsServer
from server_process import ServerProcess, server_binary


def free_port_on_every(hosts):
    """A TCP port free right now on each of `hosts` (IPv4 loopback addresses)."""
    for _ in range(20):
        sockets = []
        try:
            port = 0
            for host in hosts:
                sockets.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                sockets[-1].bind((host, port))
                port = sockets[-1].getsockname()[1]
            return port
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no port free on every loopback address")


def answered(server):
    """dmlserve_requests_total{code="OK"} summed over operators, from the server's metrics."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as page:
        text = page.read().decode()
    return sum(float(m.group(1)) for m in
               re.finditer(r'^dmlserve_requests_total\{[^}]*code="OK"[^}]*\} (\S+)$', text,
                           re.MULTILINE))


class ReplicaClientTest(unittest.TestCase):
    def setUp(self):
        self.servers = [ServerProcess(server_binary()) for _ in range(3)]
        self.client = Client(",".join(s.grpc_address for s in self.servers), timeout=60)

    def tearDown(self):
        self.client.close()
        for server in self.servers:
            server.stop()

    def check_qmatmul(self, rng, weights, b, client=None):
        a = rng.integers(0, 256, size=(1, 1, 2, weights.shape[2])).astype(np.uint8)
        got = (client or self.client).qmatmul(a, 0.5, b, 0.25, 4.0, output_dtype="UINT8")
        want, _ = reference_qmatmul(a, np.float32(0.5).reshape(1, 1, 1, 1), weights,
                                    np.float32(0.25).reshape(1, 1, 1, 1),
                                    np.float32(4.0).reshape(1, 1, 1, 1), np.uint8)
        np.testing.assert_array_equal(got, want)

    def run_load_stopping_replica_1(self, client, weights, tensor_id):
        """Three threads of matrix multiplies and streams through `client` until every replica
        has answered some and, after replica 1 is stopped, the other two 20 more each: no call
        may fail."""
        errors = []
        done = threading.Event()

        def load(seed):
            rng = np.random.default_rng(seed)
            while not done.is_set():
                try:
                    self.check_qmatmul(rng, weights, tensor_ref(tensor_id), client)
                    results = client.stream(
                        [Client.cumsum_request(np.arange(4, dtype=np.int32)) for _ in range(3)])
                    for result in results:
                        if isinstance(result, DmlserveError):
                            raise result
                        np.testing.assert_array_equal(
                            np.frombuffer(result.output.data, dtype=np.int32), [0, 1, 3, 6])
                except Exception as error:  # noqa: BLE001 - any failure fails the test
                    errors.append(error)
                    return

        threads = [threading.Thread(target=load, args=(seed,)) for seed in range(3)]
        for thread in threads:
            thread.start()
        # Bounded waits: a load that stalls fails the test instead of hanging it.
        deadline = time.monotonic() + 120
        while (sum(answered(s) for s in self.servers) < 60 and not errors
               and time.monotonic() < deadline):
            time.sleep(0.01)
        self.assertTrue(all(answered(s) > 0 for s in self.servers), "every replica serves")
        self.assertEqual(self.servers[1].stop(), 0)
        after_stop = [answered(self.servers[i]) for i in (0, 2)]
        while (min(answered(self.servers[i]) - after_stop[j] for j, i in enumerate((0, 2))) < 20
               and not errors and time.monotonic() < deadline):
            time.sleep(0.01)
        done.set()
        for thread in threads:
            thread.join()
        self.assertEqual(errors, [])

    def test_calls_spread_and_a_stopped_replica_loses_none(self):
        rng = np.random.default_rng(5)
        weights = rng.integers(0, 256, size=(1, 1, 8, 4)).astype(np.uint8)
        tensor_id = self.client.register(weights)  # the client makes one id for all three
        for server in self.servers:
            with Client(server.grpc_address) as one:
                self.assertGreaterEqual(one.info().registered_tensor_bytes, weights.nbytes,
                                        server.grpc_address)

        self.run_load_stopping_replica_1(self.client, weights, tensor_id)
        # The stopped replica cannot release anything: the error names it.
        with self.assertRaises(DmlserveError) as unreachable:
            self.client.release(tensor_id)
        self.assertIn(f"replica {self.servers[1].grpc_address}", unreachable.exception.message)

    def test_dns_target_loses_no_call_when_a_replica_stops(self):
        """The Kubernetes setup: one dns: name with the replicas behind it (127.0.0.1-3 on one
        port, resolved by the test's own DNS server, the target's authority). A call the
        stopping replica refuses is made again on another (the channel's retry policy)."""
        for server in self.servers:
            server.stop()
        port = free_port_on_every(["127.0.0.1", "127.0.0.2", "127.0.0.3"])
        self.servers = [ServerProcess(server_binary(), extra_args=[f"--listen=127.0.0.{i}:{port}"])
                        for i in (1, 2, 3)]
        rng = np.random.default_rng(6)
        weights = rng.integers(0, 256, size=(1, 1, 8, 4)).astype(np.uint8)
        for server in self.servers:  # the machine's resolver does not know the name
            with Client(server.grpc_address) as one:
                one.register(weights, "by-dns")
        with FakeDnsServer(["127.0.0.1", "127.0.0.2", "127.0.0.3"]) as dns:
            with Client(f"dns://{dns.address}/replicas.test:{port}", timeout=60) as by_name:
                self.run_load_stopping_replica_1(by_name, weights, "by-dns")
            self.assertGreater(dns.a_queries, 0)

    def test_a_stream_a_replica_breaks_off_goes_on_on_the_next(self):
        """A replica that dies in the middle of a stream, after some of its answers: the
        requests it left unanswered go to the next replica, and every answer comes back. The
        first replica takes 1 s per batch and the four scans cannot share one, so it is killed
        once its metrics show a first answer (as tests/server/replica_test.cc does)."""
        slow = ServerProcess(server_binary(),
                             extra_env={"DMLSERVE_INJECT_BATCH_DELAY_US": "1000000"})
        try:
            x = np.array([1, 2, 3, 4], dtype=np.float32)
            requests = [Client.cumsum_request(x, request_id="sum"),
                        Client.cumprod_request(x, request_id="product"),
                        Client.cumsum_request(x, reverse=True, request_id="reverse"),
                        Client.cumsum_request(x, exclusive=True, request_id="exclusive")]

            def kill_after_first_answer():
                deadline = time.monotonic() + 30
                while answered(slow) < 1 and time.monotonic() < deadline:
                    time.sleep(0.005)
                slow.kill()

            # A new client's first call goes to the first replica of the list.
            with Client(f"{slow.grpc_address},{self.servers[1].grpc_address}",
                        timeout=60) as client:
                killer = threading.Thread(target=kill_after_first_answer)
                killer.start()
                results = client.stream(requests)
                killer.join()
            for result, want in zip(results, [[1, 3, 6, 10], [1, 2, 6, 24], [10, 9, 7, 4],
                                              [0, 1, 3, 6]]):
                self.assertNotIsInstance(result, DmlserveError)
                np.testing.assert_array_equal(np.frombuffer(result.output.data, np.float32), want)
            self.assertGreaterEqual(answered(self.servers[1]), 1)
        finally:
            slow.stop()

    def test_register_names_the_replica_that_refused(self):
        weights = np.zeros((1, 1, 2, 2), dtype=np.uint8)
        with Client(self.servers[2].grpc_address) as third:
            third.register(weights, "taken")
        with self.assertRaises(DmlserveError) as refused:
            self.client.register(weights, "taken")
        self.assertEqual(refused.exception.code.name, "ALREADY_EXISTS")
        self.assertIn(f"refused by replica {self.servers[2].grpc_address}",
                      refused.exception.message)
        self.client.release("taken")
        with self.assertRaises(DmlserveError) as gone:
            self.client.release("taken")
        self.assertEqual(gone.exception.code.name, "NOT_FOUND")

    def test_dns_target_and_bad_targets(self):
        with Client(f"dns:///{self.servers[0].grpc_address}") as by_name:
            by_name.register(np.arange(3, dtype=np.int32), "by-dns")
            np.testing.assert_array_equal(by_name.cumsum(tensor_ref("by-dns")), [0, 1, 3])
            by_name.release("by-dns")
        with self.assertRaisesRegex(ValueError, "an empty entry"):
            Client("127.0.0.1:1,,127.0.0.1:2")
        with self.assertRaisesRegex(ValueError, "give a dns: name on its own"):
            Client("127.0.0.1:1,dns:///x:1")


if __name__ == "__main__":
    unittest.main()
