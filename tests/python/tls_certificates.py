"""Certificates made by openssl for a test run, and what openssl reads back from them:
the TLS suites' (test_client_tls.py) and the Prometheus one's (its expiry gauge)."""

import calendar
import os
import subprocess
import time

KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def make_certificates(directory, prefix="", days=2):
    """A CA, a server certificate for 127.0.0.1 and a client certificate it signed:
    PREFIXca.pem, PREFIXserver.pem and .key, PREFIXclient.pem and .key, valid `days`."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ca = f"{prefix}ca"
    run("req", "-x509", *KEY, "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", str(days),
        "-subj", f"/CN=dmlserve test CA {prefix}")
    for name, extra in (("server", ["-extfile", "server.ext"]), ("client", [])):
        name = prefix + name
        run("req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", str(days), "-out", f"{name}.pem", *extra)


def not_after(path):
    """A certificate file's notAfter, Unix time, as openssl reads it."""
    out = subprocess.run(["openssl", "x509", "-enddate", "-noout", "-in", path], check=True,
                         capture_output=True, text=True).stdout
    return calendar.timegm(time.strptime(out.strip().split("=", 1)[1], "%b %d %H:%M:%S %Y %Z"))
