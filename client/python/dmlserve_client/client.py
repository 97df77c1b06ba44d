"""A small synchronous client for dmlserve over gRPC."""

from __future__ import annotations

import itertools
import json
import secrets
import socket
import time
from typing import Iterable, Iterator, List, Optional, Union

import grpc
import numpy as np
import numpy.typing as npt

from dmlserve_client._stubs import dmlserve_pb2
from dmlserve_client._stubs import dmlserve_pb2_grpc
from dmlserve_client._stubs import health_pb2
from dmlserve_client._stubs import health_pb2_grpc

from dmlserve_client.tensors import as_tensor
from dmlserve_client.tensors import numpy_dtype
from dmlserve_client.tensors import numpy_from_tensor

# An operand: a numpy array (or anything numpy.asarray takes), or a Tensor message such as
# tensor_ref(id). A scale may also be a plain float (per tensor).
TensorLike = Union[npt.ArrayLike, "dmlserve_pb2.Tensor"]
ScaleLike = Union[float, npt.ArrayLike, "dmlserve_pb2.Tensor"]
DataTypeLike = Union[str, int, None]


class DmlserveError(Exception):
    """A failed call or stream item: `code` is a grpc.StatusCode, `message` the server's text."""

    def __init__(self, code: grpc.StatusCode, message: str, request_id: str = "") -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


_CODES = {code.value[0]: code for code in grpc.StatusCode}


# A replica refused the call (UNAVAILABLE: stopped or stopping) or dropped it (CANCELLED:
# gRPC cancels calls that reach a server after its shutdown began; this client cancels
# none itself). Execute has no side effects, so the next replica may take it.
_TRY_NEXT_REPLICA = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)

# The balanced channel of a dns: target stands for every replica behind the
# name, so a call one of them refuses before computing it (UNAVAILABLE: it is
# draining, or its connection failed; CANCELLED: its connection closed under
# the call) is made again, and round_robin picks another replica for the new
# attempt: what _call does over a list. The same as the C++ client's
# (client/cpp/endpoint_set.cc, kBalancedServiceConfig); gRPC allows at most 5
# attempts.
# Streams stream() opens over a dns: target's balanced channel before it gives up on
# the requests left unanswered: as many as the retry policy below allows a call.
_BALANCED_STREAM_TRIES = 5

_BALANCED_SERVICE_CONFIG = json.dumps({
    "methodConfig": [{
        # ExecuteStream is left out, as in the C++ client (endpoint_set.cc): gRPC's replay of
        # a stream's messages on a new attempt lost one now and then; ExecuteMany/stream()
        # resend what a stream left unanswered on a new stream themselves.
        "name": [{"service": "dmlserve.v1.OperatorService", "method": m}
                 for m in ("Execute", "RegisterTensor", "ReleaseTensor", "GetServerInfo")],
        "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.2s",
                        "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]},
    }],
})


def _error_from_rpc(error):
    return DmlserveError(error.code(), error.details() or "")


def _scale(value):
    """Scales are FLOAT32 by definition: numbers and arrays are converted, a plain number
    meaning per tensor ({1,1,1,1}). Tensor messages pass unchanged."""
    if value is None or isinstance(value, dmlserve_pb2.Tensor):
        return value
    array = np.asarray(value, dtype=np.float32)
    return as_tensor(array.reshape(1, 1, 1, 1) if array.ndim == 0 else array)


def _zero_point(value, data_type):
    """numpy arrays keep their dtype (a mismatch is the server's to report); plain numbers
    and lists take `data_type`, a plain number meaning per tensor ({1,1,1,1})."""
    if value is None or isinstance(value, dmlserve_pb2.Tensor):
        return value
    if isinstance(value, np.ndarray) or data_type is None:
        array = np.asarray(value)
    else:
        array = np.asarray(value, dtype=numpy_dtype(data_type))
    return as_tensor(array.reshape(1, 1, 1, 1) if array.ndim == 0 else array)


def tls_credentials(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                    key_file: Optional[str] = None) -> grpc.ChannelCredentials:
    """Credentials for a server started with --tls_cert_file: `ca_file` holds the CA
    certificates (PEM) that signed the server's certificate (None: the system's roots);
    `cert_file` and `key_file` are this client's certificate and key, for a server started
    with --tls_client_ca_file (mutual TLS)."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")

    def read(path):
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(root_certificates=read(ca_file),
                                        private_key=read(key_file),
                                        certificate_chain=read(cert_file))


class _Endpoint:
    """One server: its name (for errors), channel and stubs."""

    def __init__(self, name: str, channel: grpc.Channel) -> None:
        self.name = name
        self.channel = channel
        self.stub = dmlserve_pb2_grpc.OperatorServiceStub(channel)
        self.health = health_pb2_grpc.HealthStub(channel)
        self.state = grpc.ChannelConnectivity.IDLE
        channel.subscribe(self._on_state)

    def _on_state(self, state: grpc.ChannelConnectivity) -> None:
        self.state = state


def _split_host_port(name: str) -> tuple:
    if name.startswith("["):
        host, _, rest = name[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else "443"
    host, colon, port = name.rpartition(":")
    return (host, port) if colon else (name, "443")


class Client:
    """A connection to a dmlserve server, or to several replicas of it. Methods raise
    DmlserveError on failure.

    `address` is "host:port" (any gRPC target); "host1:port,host2:port,..." for replicas,
    which calls visit round-robin; or "dns:///name:port" for every address a name resolves
    to (a Kubernetes headless Service), balanced by gRPC's round_robin policy. With
    replicas, a call a replica refused or dropped (UNAVAILABLE, CANCELLED: one that stopped)
    is sent to the next one;
    register() and release() reach every replica; a stream stays on one.

    `timeout` (seconds) applies to each call that does not give its own. `credentials`
    (grpc.ChannelCredentials, e.g. from tls_credentials) connect over TLS; None is plaintext.
    """

    def __init__(self, address: str, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None) -> None:
        self._credentials = credentials
        self._timeout = timeout
        self._dns = None
        self._resolved = {}
        self._next = itertools.count()
        if not address:
            raise ValueError("empty server address")
        if address.startswith("dns:"):
            name = address[4:]
            if name.startswith("//"):
                name = name[2:].partition("/")[2]
            if not name or "," in name:
                raise ValueError(f"server address {address!r}: a dns: target names one host "
                                 "(dns:///name:port)")
            self._dns = _split_host_port(name)
            self._endpoints = [_Endpoint(address, self._channel(
                address, [("grpc.lb_policy_name", "round_robin"),
                          ("grpc.service_config", _BALANCED_SERVICE_CONFIG),
                          ("grpc.per_rpc_retry_buffer_size", 2**31 - 1)]))]
        else:
            self._endpoints = []
            for part in (p.strip() for p in address.split(",")):
                if not part:
                    raise ValueError(f"server address {address!r}: an empty entry in the list")
                if part.startswith("dns:"):
                    raise ValueError(f"server address {address!r}: a list takes host:port "
                                     "entries; give a dns: name on its own")
                self._endpoints.append(_Endpoint(part, self._channel(part)))

    def _channel(self, target: str, extra: Optional[list] = None) -> grpc.Channel:
        options = [("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1)] + (extra or [])
        if self._credentials is None:
            return grpc.insecure_channel(target, options=options)
        return grpc.secure_channel(target, self._credentials, options=options)

    def _turn(self) -> int:
        """The position of a call's first try: round-robin, passing over replicas that
        failed to connect. Try k of the call goes to position turn + k, so that no retry
        lands on a replica the call already tried, whatever other threads do."""
        start = next(self._next)
        count = len(self._endpoints)
        for i in range(count):
            if self._endpoints[(start + i) % count].state != \
                    grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                return start + i
        return start

    def _pick(self) -> _Endpoint:
        return self._endpoints[self._turn() % len(self._endpoints)]

    def _replicas(self) -> List[_Endpoint]:
        """Every replica: the list, or a dns: name's addresses resolved now."""
        if self._dns is None:
            return self._endpoints
        host, port = self._dns
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise DmlserveError(grpc.StatusCode.UNAVAILABLE,
                                f"could not resolve {host!r}: {error}") from None
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        resolved = {}
        for family, _, _, _, sockaddr in infos:
            target = (f"ipv6:[{sockaddr[0]}]:{port}" if family == socket.AF_INET6
                      else f"ipv4:{sockaddr[0]}:{port}")
            if target not in resolved:
                resolved[target] = self._resolved.get(target) or _Endpoint(
                    target.partition(":")[2],
                    self._channel(target, [("grpc.default_authority", authority)]))
        for target, endpoint in self._resolved.items():
            if target not in resolved:
                endpoint.channel.close()
        self._resolved = resolved
        return list(resolved.values())

    def close(self) -> None:
        for endpoint in self._endpoints + list(self._resolved.values()):
            endpoint.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method, request, timeout, retry=False):
        """`method` (a function of an endpoint) on the next replica; with `retry`, a call
        refused or dropped goes to the next one, once per replica, within one deadline."""
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        attempts = len(self._endpoints) if retry else 1
        turn = self._turn()
        for attempt in range(attempts):
            endpoint = self._endpoints[(turn + attempt) % len(self._endpoints)]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return method(endpoint)(request, timeout=left)
            except grpc.RpcError as error:
                failure = _error_from_rpc(error)
                if len(self._endpoints) > 1:
                    failure = DmlserveError(failure.code,
                                            f"{failure.message} (replica {endpoint.name})")
                if failure.code not in _TRY_NEXT_REPLICA or attempt + 1 == attempts:
                    raise failure from None

    # Raw requests.

    def execute(self, request: "dmlserve_pb2.ExecuteRequest",
                timeout: Optional[float] = None) -> "dmlserve_pb2.ExecuteResponse":
        """Execute an ExecuteRequest; returns the ExecuteResponse."""
        return self._call(lambda e: e.stub.Execute, request, timeout, retry=True)

    def execute_stream(self, requests: Iterable["dmlserve_pb2.ExecuteRequest"],
                       timeout: Optional[float] = None
                       ) -> Iterator["dmlserve_pb2.ExecuteResponse"]:
        """Yields responses in completion order (match them by request_id).

        A failed item is a response whose `status.code` is not 0; a failed stream
        raises DmlserveError.
        """
        return self._stream_on(self._pick(), requests, timeout)

    def _stream_on(self, endpoint, requests, timeout):
        call = endpoint.stub.ExecuteStream(
            iter(requests), timeout=self._timeout if timeout is None else timeout)
        try:
            yield from call
        except grpc.RpcError as error:
            failure = _error_from_rpc(error)
            if len(self._endpoints) > 1:
                failure = DmlserveError(failure.code,
                                        f"{failure.message} (replica {endpoint.name})")
            raise failure from None

    def stream(self, requests: Iterable["dmlserve_pb2.ExecuteRequest"],
               timeout: Optional[float] = None
               ) -> List[Union["dmlserve_pb2.ExecuteResponse", DmlserveError]]:
        """Sends all `requests` on one stream; returns, in request order, each
        ExecuteResponse or the item's DmlserveError. Missing request_ids are filled in.
        When the stream fails (on every replica tried) before any answer, that error is
        raised; after some answers, the unanswered items carry it."""
        requests = list(requests)
        index = {}
        for i, request in enumerate(requests):
            if not request.request_id:
                request.request_id = f"request-{i}"
            if request.request_id in index:
                raise ValueError(f"duplicate request_id {request.request_id!r}")
            index[request.request_id] = i
        timeout = self._timeout if timeout is None else timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        results = [None] * len(requests)
        # A stream that a replica refused or broke off (one that stopped) goes to the next
        # replica with the requests it left unanswered: executing one again is harmless.
        # Over a dns: target's balanced channel each new stream may reach another replica:
        # as many tries as the channel's retry policy gives a call.
        attempts = _BALANCED_STREAM_TRIES if self._dns is not None else len(self._endpoints)
        turn = self._turn()
        failure = None
        for attempt in range(attempts):
            if attempt > 0 and all(result is not None for result in results):
                failure = None  # the stream failed after its last answer: nothing to send
                break
            endpoint = self._endpoints[(turn + attempt) % len(self._endpoints)]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            failure = self._stream_once(endpoint, requests, index, left, results)
            if failure is None or failure.code not in _TRY_NEXT_REPLICA:
                break
        if failure is not None and all(result is None for result in results):
            raise failure
        for i, result in enumerate(results):
            if result is None:
                results[i] = failure if failure is not None else DmlserveError(
                    grpc.StatusCode.INTERNAL, "the stream ended without a response",
                    requests[i].request_id)
        return results

    def _stream_once(self, endpoint, requests, index, timeout, results):
        """One stream of the requests without a result yet; fills in the results it gets
        and returns the stream's DmlserveError, or None when it ended normally."""
        pending = [request for i, request in enumerate(requests) if results[i] is None]
        sent = {request.request_id for request in pending}
        stream = self._stream_on(endpoint, pending, timeout)
        while True:
            try:
                response = next(stream)
            except StopIteration:
                return None
            except DmlserveError as error:
                return error
            i = index.get(response.request_id)
            if i is None or response.request_id not in sent or results[i] is not None:
                raise DmlserveError(grpc.StatusCode.INTERNAL,
                                    f"unexpected response for {response.request_id!r}")
            if response.HasField("status") and response.status.code != 0:
                results[i] = DmlserveError(_CODES.get(response.status.code,
                                                      grpc.StatusCode.UNKNOWN),
                                           response.status.message, response.request_id)
            else:
                results[i] = response

    # Operators: inputs are numpy arrays (or Tensor messages, e.g. tensor_ref());
    # the result is the output as a numpy array.

    @staticmethod
    def cumsum_request(input: TensorLike, axis: int = 0, reverse: bool = False,
                       exclusive: bool = False,
                       request_id: str = "") -> "dmlserve_pb2.ExecuteRequest":
        return dmlserve_pb2.ExecuteRequest(
            request_id=request_id,
            cumulative_summation=dmlserve_pb2.CumulativeSummation(
                input=as_tensor(input), axis=axis, has_exclusive_sum=exclusive,
                axis_direction=(dmlserve_pb2.AXIS_DIRECTION_DECREASING if reverse
                                else dmlserve_pb2.AXIS_DIRECTION_INCREASING)))

    @staticmethod
    def cumprod_request(input: TensorLike, axis: int = 0, reverse: bool = False,
                        exclusive: bool = False,
                        request_id: str = "") -> "dmlserve_pb2.ExecuteRequest":
        return dmlserve_pb2.ExecuteRequest(
            request_id=request_id,
            cumulative_product=dmlserve_pb2.CumulativeProduct(
                input=as_tensor(input), axis=axis, has_exclusive_product=exclusive,
                axis_direction=(dmlserve_pb2.AXIS_DIRECTION_DECREASING if reverse
                                else dmlserve_pb2.AXIS_DIRECTION_INCREASING)))

    @staticmethod
    def qmatmul_request(a: TensorLike, a_scale: ScaleLike, b: TensorLike, b_scale: ScaleLike,
                        output_scale: ScaleLike, a_zero_point: Optional[TensorLike] = None,
                        b_zero_point: Optional[TensorLike] = None,
                        output_zero_point: Optional[TensorLike] = None,
                        output_dtype: DataTypeLike = None,
                        request_id: str = "") -> "dmlserve_pb2.ExecuteRequest":
        """Scales may be plain floats (per tensor) or arrays shaped {1,1,M,1} / {1,1,1,N},
        converted to FLOAT32. Zero points given as plain numbers take the type of their
        matrix (or `output_dtype`); numpy arrays keep theirs. With a registered matrix
        (tensor_ref), pass zero points as typed numpy arrays."""
        a = as_tensor(a)
        b = as_tensor(b)
        op = dmlserve_pb2.QuantizedLinearMatrixMultiply(
            a=a, b=b,
            a_scale=_scale(a_scale), b_scale=_scale(b_scale), output_scale=_scale(output_scale))
        for field, value, data_type in (
                ("a_zero_point", a_zero_point, a.data_type or None),
                ("b_zero_point", b_zero_point, b.data_type or None),
                ("output_zero_point", output_zero_point, output_dtype)):
            tensor = _zero_point(value, data_type)
            if tensor is not None:
                getattr(op, field).CopyFrom(tensor)
        if output_zero_point is None and output_dtype is not None:
            op.output_data_type = (dmlserve_pb2.DataType.Value(output_dtype.upper())
                                   if isinstance(output_dtype, str) else output_dtype)
        return dmlserve_pb2.ExecuteRequest(request_id=request_id,
                                           quantized_linear_matrix_multiply=op)

    def cumsum(self, input: TensorLike, axis: int = 0, reverse: bool = False,
               exclusive: bool = False, timeout: Optional[float] = None) -> np.ndarray:
        request = self.cumsum_request(input, axis, reverse, exclusive)
        return numpy_from_tensor(self.execute(request, timeout).output)

    def cumprod(self, input: TensorLike, axis: int = 0, reverse: bool = False,
                exclusive: bool = False, timeout: Optional[float] = None) -> np.ndarray:
        request = self.cumprod_request(input, axis, reverse, exclusive)
        return numpy_from_tensor(self.execute(request, timeout).output)

    def qmatmul(self, a: TensorLike, a_scale: ScaleLike, b: TensorLike, b_scale: ScaleLike,
                output_scale: ScaleLike, a_zero_point: Optional[TensorLike] = None,
                b_zero_point: Optional[TensorLike] = None,
                output_zero_point: Optional[TensorLike] = None,
                output_dtype: DataTypeLike = None,
                timeout: Optional[float] = None) -> np.ndarray:
        request = self.qmatmul_request(a, a_scale, b, b_scale, output_scale, a_zero_point,
                                       b_zero_point, output_zero_point, output_dtype)
        return numpy_from_tensor(self.execute(request, timeout).output)

    # Registered tensors, server information, health.

    def register(self, tensor: TensorLike, tensor_id: str = "",
                 timeout: Optional[float] = None) -> str:
        """Keeps `tensor` on the server; returns its tensor_id."""
        tensor_copy = dmlserve_pb2.Tensor()
        tensor_copy.CopyFrom(as_tensor(tensor))
        tensor = tensor_copy
        if tensor_id:
            tensor.tensor_id = tensor_id
        replicas = self._replicas()
        if not tensor.tensor_id and len(replicas) > 1:
            tensor.tensor_id = "t-" + secrets.token_hex(16)  # one id every replica shares
        request = dmlserve_pb2.RegisterTensorRequest(tensor=tensor)
        timeout = self._timeout if timeout is None else timeout
        registered = []
        for endpoint in replicas:
            try:
                response = endpoint.stub.RegisterTensor(request, timeout=timeout)
            except grpc.RpcError as error:
                failure = _error_from_rpc(error)
                if len(replicas) > 1:
                    where = (f"registered on {', '.join(registered)}; release() removes it there"
                             if registered else "no replica registered it")
                    failure = DmlserveError(
                        failure.code, f"RegisterTensor refused by replica {endpoint.name}: "
                        f"{failure.message} ({where})")
                raise failure from None
            registered.append(endpoint.name)
        return response.tensor_id

    def release(self, tensor_id: str, timeout: Optional[float] = None) -> None:
        """Releases the tensor on every replica; one that does not have it is no error
        unless none had it."""
        replicas = self._replicas()
        request = dmlserve_pb2.ReleaseTensorRequest(tensor_id=tensor_id)
        timeout = self._timeout if timeout is None else timeout
        not_found = None
        released = 0
        for endpoint in replicas:
            try:
                endpoint.stub.ReleaseTensor(request, timeout=timeout)
                released += 1
            except grpc.RpcError as error:
                failure = _error_from_rpc(error)
                if len(replicas) > 1:
                    failure = DmlserveError(failure.code,
                                            f"{failure.message} (replica {endpoint.name})")
                if failure.code != grpc.StatusCode.NOT_FOUND:
                    raise failure from None
                not_found = failure
        if released == 0 and not_found is not None:
            raise not_found

    def info(self, timeout: Optional[float] = None) -> "dmlserve_pb2.GetServerInfoResponse":
        """The GetServerInfoResponse."""
        return self._call(lambda e: e.stub.GetServerInfo, dmlserve_pb2.GetServerInfoRequest(),
                          timeout)

    def health(self, service: str = "", timeout: Optional[float] = None) -> str:
        """One of SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN, as a string."""
        response = self._call(lambda e: e.health.Check,
                              health_pb2.HealthCheckRequest(service=service), timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

