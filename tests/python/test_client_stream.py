"""ExecuteStream through the Python client: many requests in flight, responses matched by
request_id whatever their order, and a bad item that fails alone."""

import threading
import unittest

import numpy as np

from client_test_support import ServerTestCase, reference_scan
from dmlserve_client import Client, DmlserveError, numpy_from_tensor

import grpc


class StreamTest(ServerTestCase):
    def make_requests(self, count, bad_index):
        rng = np.random.default_rng(5)
        requests, inputs = [], []
        for i in range(count):
            # Big and small requests interleaved, so small ones can finish first.
            length = 200000 if i % 4 == 0 else int(rng.integers(1, 50))
            x = rng.integers(-100, 100, size=(2, length)).astype(np.int32)
            axis = 1
            if i == bad_index:
                axis = 2  # Out of range for 2-D input.
            requests.append(Client.cumsum_request(x, axis=axis, request_id=f"item-{i}"))
            inputs.append(x)
        return requests, inputs

    def test_out_of_order_responses_and_a_bad_item_mid_stream(self):
        count, bad = 40, 21
        requests, inputs = self.make_requests(count, bad)
        arrival = []
        for response in self.client.execute_stream(requests):
            arrival.append(response.request_id)
            index = int(response.request_id.split("-")[1])
            if index == bad:
                self.assertEqual(response.status.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
                self.assertIn("axis", response.status.message)
                continue
            self.assertEqual(response.status.code, 0, response.status.message)
            np.testing.assert_array_equal(numpy_from_tensor(response.output),
                                          reference_scan(inputs[index], 1, False, False, False))
        self.assertEqual(sorted(arrival), sorted(r.request_id for r in requests))
        # Whether responses actually overtook each other depends on scheduling;
        # report it rather than assert on timing.
        if arrival != [r.request_id for r in requests]:
            print(f"\nresponses arrived out of order: {arrival[:10]}...")

    def test_stream_returns_results_in_request_order(self):
        requests, inputs = self.make_requests(12, 5)
        for r in requests:
            r.request_id = ""  # Filled in by stream().
        results = self.client.stream(requests)
        self.assertEqual(len(results), 12)
        for i, result in enumerate(results):
            if i == 5:
                self.assertIsInstance(result, DmlserveError)
                self.assertEqual(result.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("axis", result.message)
                continue
            self.assertEqual(result.request_id, f"request-{i}")
            np.testing.assert_array_equal(numpy_from_tensor(result.output),
                                          reference_scan(inputs[i], 1, False, False, False))
        self.assert_server_still_answers()

    def test_sending_while_receiving(self):
        # A generator feeds the stream lazily while responses are read.
        fed = threading.Event()
        x = np.ones((1, 8), dtype=np.float32)

        def requests():
            for i in range(30):
                yield Client.cumsum_request(x * i, axis=1, request_id=str(i))
            fed.set()

        seen = {}
        for response in self.client.execute_stream(requests()):
            seen[response.request_id] = numpy_from_tensor(response.output)
        self.assertTrue(fed.is_set())
        self.assertEqual(len(seen), 30)
        for key, output in seen.items():
            np.testing.assert_array_equal(output, np.cumsum(x * int(key), axis=1))


if __name__ == "__main__":
    unittest.main()
