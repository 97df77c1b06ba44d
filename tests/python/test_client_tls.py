"""The Python client over TLS and mutual TLS, against a real server, with certificates
made by openssl for this run."""

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from dmlserve_client import Client, DmlserveError, tls_credentials
from server_process import ServerProcess

KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def make_certificates(directory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", *KEY, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=dmlserve test CA")
    for name, extra in (("server", ["-extfile", "server.ext"]), ("client", [])):
        run("req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        if name == "server":
            with open(os.path.join(directory, "server.ext"), "w") as f:
                f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *extra)


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dmlserve_tls_")
        make_certificates(cls.dir)

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

    def test_a_certificate_without_its_key_is_refused(self):
        with self.assertRaises(ValueError):
            tls_credentials(ca_file=self.path("ca.pem"), cert_file=self.path("client.pem"))


if __name__ == "__main__":
    unittest.main()
