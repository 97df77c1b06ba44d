"""The Python client over TLS and mutual TLS, against a real server, with certificates
made by openssl for this run."""

import os
import re
import shutil
import tempfile
import time
import unittest
import urllib.request

import numpy as np

from dmlserve_client import Client, DmlserveError, tls_credentials
from server_process import ServerProcess
from tls_certificates import make_certificates, not_after


def expiry_gauge(server):
    """dmlserve_tls_certificate_expiry_timestamp_seconds, or None."""
    with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    m = re.search(r"^dmlserve_tls_certificate_expiry_timestamp_seconds (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dmlserve_tls_")
        make_certificates(cls.dir)
        make_certificates(cls.dir, prefix="renewed_", days=3)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self, mutual):
        args = [f"--tls_cert_file={self.path('server.pem')}",
                f"--tls_key_file={self.path('server.key')}"]
        if mutual:
            args.append(f"--tls_client_ca_file={self.path('ca.pem')}")
        server = ServerProcess(os.environ["DMLSERVE_BINARY"], extra_args=args)
        self.addCleanup(server.stop)
        return server

    def check_calls(self, client):
        x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(client.cumsum(x, axis=1), np.cumsum(x, axis=1))
        replies = list(client.stream([Client.cumsum_request(x, axis=0, request_id=str(i))
                                      for i in range(3)]))
        self.assertEqual(len(replies), 3)

    def test_tls(self):
        server = self.start(mutual=False)
        self.assertEqual(expiry_gauge(server), not_after(self.path("server.pem")))
        with Client(server.grpc_address, timeout=60,
                    credentials=tls_credentials(ca_file=self.path("ca.pem"))) as client:
            self.check_calls(client)
        # A plaintext client gets nowhere.
        with Client(server.grpc_address, timeout=10) as client:
            with self.assertRaises(DmlserveError) as raised:
                client.cumsum(np.ones(3, dtype=np.float32))
            self.assertEqual(raised.exception.code.name, "UNAVAILABLE")

    def test_mutual_tls(self):
        server = self.start(mutual=True)
        credentials = tls_credentials(ca_file=self.path("ca.pem"),
                                      cert_file=self.path("client.pem"),
                                      key_file=self.path("client.key"))
        with Client(server.grpc_address, timeout=60, credentials=credentials) as client:
            self.check_calls(client)
        without = tls_credentials(ca_file=self.path("ca.pem"))
        with Client(server.grpc_address, timeout=10, credentials=without) as client:
            with self.assertRaises(DmlserveError) as raised:
                client.cumsum(np.ones(3, dtype=np.float32))
            self.assertEqual(raised.exception.code.name, "UNAVAILABLE")

    def check_calls_within_a_minute(self, server, credentials):
        """Calls with `credentials` until they succeed: the server reads its TLS files again
        every second (--tls_reload_interval=1s)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(server.grpc_address, timeout=10, credentials=credentials) as client:
                    self.check_calls(client)
                return
            except DmlserveError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def test_renewed_certificates_serve_without_a_restart(self):
        """--tls_reload_interval: the server's certificate and key and the client CA,
        replaced on disk by another CA's, serve new connections without a restart."""
        live = tempfile.mkdtemp(prefix="live_", dir=self.dir)

        def replace(name, source=None, text=None):
            """Each file replaced whole, as a renewed Kubernetes Secret's volume does."""
            if text is None:
                with open(self.path(source)) as f:
                    text = f.read()
            with open(os.path.join(live, name + ".new"), "w") as f:
                f.write(text)
            os.replace(os.path.join(live, name + ".new"), os.path.join(live, name))

        for name in ("server.pem", "server.key", "ca.pem"):
            replace(name, name)
        server = ServerProcess(os.environ["DMLSERVE_BINARY"], extra_args=[
            f"--tls_cert_file={os.path.join(live, 'server.pem')}",
            f"--tls_key_file={os.path.join(live, 'server.key')}",
            f"--tls_client_ca_file={os.path.join(live, 'ca.pem')}", "--tls_reload_interval=1s"])
        self.addCleanup(server.stop)
        before = tls_credentials(ca_file=self.path("ca.pem"), cert_file=self.path("client.pem"),
                                 key_file=self.path("client.key"))
        after = tls_credentials(ca_file=self.path("renewed_ca.pem"),
                                cert_file=self.path("renewed_client.pem"),
                                key_file=self.path("renewed_client.key"))
        with Client(server.grpc_address, timeout=60, credentials=before) as client:
            self.check_calls(client)
        self.assertEqual(expiry_gauge(server), not_after(self.path("server.pem")))

        for name in ("server.pem", "server.key", "ca.pem"):
            replace(name, "renewed_" + name)
        self.check_calls_within_a_minute(server, after)
        self.assertEqual(expiry_gauge(server), not_after(self.path("renewed_server.pem")))
        # The old CA's clients no longer trust the server, nor it them.
        with Client(server.grpc_address, timeout=10, credentials=before) as client:
            with self.assertRaises(DmlserveError) as raised:
                client.cumsum(np.ones(3, dtype=np.float32))
            self.assertEqual(raised.exception.code.name, "UNAVAILABLE")

        # Files that are not a certificate and its key: gRPC takes them as they are, so
        # handshakes fail, and the expiry gauge has no sample (an alert on absent() sees it).
        replace("server.pem", text="not a certificate\n")
        self.assertIsNone(expiry_gauge(server))
        replace("server.pem", "renewed_server.pem")
        replace("server.key", "server.key")  # the first CA's server key
        self.assertIsNone(expiry_gauge(server))
        # Put right, the pair serves again.
        replace("server.key", "renewed_server.key")
        self.assertEqual(expiry_gauge(server), not_after(self.path("renewed_server.pem")))
        self.check_calls_within_a_minute(server, after)
        # A file that cannot be read at all: the last pair keeps serving, once gRPC's
        # watcher has looked (it says so on stderr).
        os.remove(os.path.join(live, "server.pem"))
        self.assertIsNone(expiry_gauge(server))
        deadline = time.monotonic() + 60
        while not any("server.pem" in line and "failed" in line for line in server.output):
            self.assertLess(time.monotonic(), deadline, "gRPC never noticed the missing file")
            time.sleep(0.2)
        with Client(server.grpc_address, timeout=60, credentials=after) as client:
            self.check_calls(client)

    def test_a_certificate_without_its_key_is_refused(self):
        with self.assertRaises(ValueError):
            tls_credentials(ca_file=self.path("ca.pem"), cert_file=self.path("client.pem"))


if __name__ == "__main__":
    unittest.main()
