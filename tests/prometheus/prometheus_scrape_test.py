"""A real Prometheus scrapes the real dmlserve and stores exact request counts.

Starts dmlserve (DMLSERVE_BINARY, gRPC over TLS with certificates made by
openssl) and Prometheus (PROMETHEUS_BINARY) on free loopback ports, Prometheus
scraping dmlserve's /metrics every second, sends a known number of Execute
requests with a gRPC client, then asks Prometheus' HTTP API until it reports
exactly that many, and the certificate's expiry as openssl reads it. Also runs `promtool check
metrics` (PROMTOOL_BINARY) over the live endpoint, which parses the output
with Prometheus' own parser and lints the metric names.
"""

import json
import os
import re
import socket
import struct
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import grpc

from dmlserve.v1 import dmlserve_pb2
from dmlserve.v1 import dmlserve_pb2_grpc
from server_process import ServerProcess, server_binary
from tls_certificates import make_certificates, not_after

ALERT_RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                           "prometheus", "dmlserve-alerts.yml")
DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                         "grafana", "dmlserve-dashboard.json")
POLL_TIMEOUT_S = 60.0
VALID_REQUESTS = 17
INVALID_REQUESTS = 4


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers, response.read().decode("utf-8")


class PrometheusProcess:
    """Prometheus with a throwaway config and TSDB, scraping one target and evaluating
    deploy/prometheus/dmlserve-alerts.yml."""

    def __init__(self, binary, target, workdir):
        self.log_path = os.path.join(workdir, "prometheus.log")
        config_path = os.path.join(workdir, "prometheus.yml")
        with open(config_path, "w") as config:
            config.write(
                "global:\n"
                "  scrape_interval: 1s\n"
                "  scrape_timeout: 1s\n"
                "  evaluation_interval: 1s\n"
                f"rule_files: ['{ALERT_RULES}']\n"
                "scrape_configs:\n"
                "  - job_name: dmlserve\n"
                "    static_configs:\n"
                f"      - targets: ['{target}']\n")
        # The port is picked free, then bound by Prometheus: a race with other
        # processes, so a few attempts.
        last_error = None
        for _ in range(3):
            self.port = free_loopback_port()
            self._log = open(self.log_path, "w")
            self._proc = subprocess.Popen(
                [binary,
                 f"--config.file={config_path}",
                 f"--storage.tsdb.path={os.path.join(workdir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--log.level=info"],
                stdout=self._log, stderr=subprocess.STDOUT)
            try:
                self._wait_ready()
                return
            except RuntimeError as error:
                last_error = error
                self.stop()
        raise last_error

    def _wait_ready(self):
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError("prometheus exited at start-up:\n" + self.log())
            try:
                status, _, _ = http_get(f"http://127.0.0.1:{self.port}/-/ready", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready:\n" + self.log())

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params)
        try:
            _, _, body = http_get(url)
        except urllib.error.HTTPError as error:  # 4xx carries the PromQL error
            body = error.read().decode("utf-8")
        return json.loads(body), body

    def query(self, promql):
        """The instant vector's single value, or None when it has no series."""
        answer, body = self.api("query", query=promql)
        if answer.get("status") != "success":
            raise RuntimeError(f"query {promql!r} failed: {body}")
        result = answer["data"]["result"]
        if not result:
            return None, body
        if len(result) != 1:
            raise RuntimeError(f"query {promql!r}: expected one series: {body}")
        return float(result[0]["value"][1]), body

    def log(self):
        with open(self.log_path) as log:
            return log.read()

    def stop(self):
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
        return self._proc.returncode


def cumulative_summation_request(request_id, axis):
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    return dmlserve_pb2.ExecuteRequest(
        request_id=request_id,
        cumulative_summation=dmlserve_pb2.CumulativeSummation(
            input=dmlserve_pb2.Tensor(data_type=dmlserve_pb2.FLOAT32, sizes=[2, 3],
                                      data=struct.pack("<6f", *values)),
            axis=axis))


class PrometheusScrapeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.TemporaryDirectory(prefix="dmlserve_prometheus_")
        # gRPC over TLS, so that every family the dashboard reads has samples
        # (the certificate's expiry has none without TLS); /metrics stays
        # plain HTTP.
        make_certificates(cls.workdir.name)
        cls.certificate = os.path.join(cls.workdir.name, "server.pem")
        cls.server = ServerProcess(server_binary(), extra_args=[
            f"--tls_cert_file={cls.certificate}",
            f"--tls_key_file={os.path.join(cls.workdir.name, 'server.key')}"])
        try:
            cls.prometheus = PrometheusProcess(os.environ.get("PROMETHEUS_BINARY", "prometheus"),
                                               cls.server.metrics_address, cls.workdir.name)
        except Exception:
            cls.server.stop()
            cls.workdir.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        prometheus_code = cls.prometheus.stop()
        server_code = cls.server.stop()
        cls.workdir.cleanup()
        # Both must shut down cleanly on SIGTERM.
        assert prometheus_code == 0, f"prometheus exited with {prometheus_code}"
        assert server_code == 0, (f"dmlserve exited with {server_code}:\n"
                                  + "".join(cls.server.output))

    def diagnostics(self, last_answer):
        return ("\nlast answer: " + str(last_answer)
                + "\n--- dmlserve output ---\n" + "".join(self.server.output)
                + "\n--- prometheus log ---\n" + self.prometheus.log())

    def wait_for_value(self, promql, expected):
        deadline = time.monotonic() + POLL_TIMEOUT_S
        value, answer = None, None
        while time.monotonic() < deadline:
            value, answer = self.prometheus.query(promql)
            if value == expected:
                return
            time.sleep(0.5)
        self.fail(f"{promql} = {value}, expected {expected} within {POLL_TIMEOUT_S} s"
                  + self.diagnostics(answer))

    def test_1_endpoint_passes_promtool(self):
        status, headers, body = http_get(f"http://{self.server.metrics_address}/metrics")
        self.assertEqual(status, 200)
        # prometheus-cpp's exposer: plain text, which Prometheus reads as the
        # 0.0.4 text exposition format.
        self.assertEqual(headers["Content-Type"], "text/plain; charset=utf-8")
        self.assertIn("# TYPE dmlserve_build_info gauge", body)
        check = subprocess.run([os.environ.get("PROMTOOL_BINARY", "promtool"), "check", "metrics"],
                               input=body, capture_output=True, text=True, timeout=60)
        self.assertEqual((check.returncode, check.stdout + check.stderr), (0, ""),
                         "promtool check metrics on:\n" + body)

    def test_2_prometheus_counts_every_request(self):
        # Scraping works before any request is made.
        self.wait_for_value('up{job="dmlserve"}', 1.0)

        failures = 0
        with open(os.path.join(self.workdir.name, "ca.pem"), "rb") as ca:
            credentials = grpc.ssl_channel_credentials(root_certificates=ca.read())
        with grpc.secure_channel(self.server.grpc_address, credentials) as channel:
            stub = dmlserve_pb2_grpc.OperatorServiceStub(channel)
            for i in range(VALID_REQUESTS):
                response = stub.Execute(cumulative_summation_request(f"ok-{i}", axis=1),
                                        timeout=30)
                self.assertEqual(response.request_id, f"ok-{i}")
            for i in range(INVALID_REQUESTS):
                # Axis 7 on a 2-D tensor: rejected, and still counted.
                with self.assertRaises(grpc.RpcError) as error:
                    stub.Execute(cumulative_summation_request(f"bad-{i}", axis=7), timeout=30)
                self.assertNotEqual(error.exception.code(), grpc.StatusCode.OK)
                failures += 1

        total = VALID_REQUESTS + INVALID_REQUESTS
        self.wait_for_value("sum(dmlserve_requests_total)", float(total))
        self.wait_for_value('sum(dmlserve_requests_total{code="OK"})', float(VALID_REQUESTS))
        self.wait_for_value('sum(dmlserve_requests_total{code!="OK"})', float(failures))
        self.wait_for_value("sum(dmlserve_request_duration_seconds_count)", float(total))
        self.wait_for_value('up{job="dmlserve"}', 1.0)
        # The certificate's expiry, as stored: what the dashboard's and an
        # alert's arithmetic start from.
        self.wait_for_value("dmlserve_tls_certificate_expiry_timestamp_seconds",
                            float(not_after(self.certificate)))

    def test_3_dashboard_queries_are_valid_and_use_exported_names(self):
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        expressions = [target["expr"] for panel in dashboard["panels"]
                       for target in panel.get("targets", [])]
        self.assertTrue(expressions)
        referenced = set()
        for expr in expressions:
            referenced |= set(re.findall(r"dmlserve_[a-z_]+", expr))
        # After test_2's traffic every family the service exports has samples
        # once the next scrape is stored.
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            answer, body = self.prometheus.api("label/__name__/values")
            # Every name, device removals and recoveries too (exported at 0
            # from the start).
            missing = referenced - set(answer["data"])
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertFalse(missing, "the dashboard uses names Prometheus never saw"
                         + self.diagnostics(body))
        for expr in expressions:
            # Grafana's variables, as Grafana would substitute them.
            promql = (expr.replace("$__rate_interval", "1m").replace("$__range", "5m")
                      .replace("$instance", ".*"))
            answer, body = self.prometheus.api("query", query=promql)
            self.assertEqual(answer.get("status"), "success", f"{promql}: {body}")

    def test_4_alert_rules_evaluate_on_the_real_series(self):
        # Every rule evaluates without error against what dmlserve exports.
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            answer, body = self.prometheus.api("rules")
            rules = [rule for group in answer["data"]["groups"] for rule in group["rules"]]
            evaluated = [rule for rule in rules if rule.get("health") != "unknown"]
            if (rules and len(evaluated) == len(rules)) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(len(rules), 7, body)
        self.assertEqual([(rule["name"], rule.get("lastError", "")) for rule in rules
                          if rule.get("health") != "ok"], [], body)
        # The test's certificate is valid for 2 days: both expiry alerts are on their way
        # (pending for their 10 minutes), and nothing else is. Polled: one slow scrape on a
        # loaded machine makes `up` 0 for a second, and DmlserveDown pending with it.
        expected = [("DmlserveTlsCertificateExpiresSoon", "critical", "pending"),
                    ("DmlserveTlsCertificateExpiresSoon", "warning", "pending")]
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while True:
            answer, body = self.prometheus.api("alerts")
            alerts = sorted((alert["labels"]["alertname"], alert["labels"]["severity"],
                             alert["state"]) for alert in answer["data"]["alerts"])
            if alerts == expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(alerts, expected, self.diagnostics(body))


if __name__ == "__main__":
    unittest.main()
