"""A small synchronous client for dmlserve over gRPC."""

from __future__ import annotations

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


class Client:
    """One channel to a dmlserve server. Methods raise DmlserveError on failure.

    `timeout` (seconds) applies to each call that does not give its own. `credentials`
    (grpc.ChannelCredentials, e.g. from tls_credentials) connect over TLS; None is plaintext.
    """

    def __init__(self, address: str, timeout: Optional[float] = None,
                 credentials: Optional[grpc.ChannelCredentials] = None) -> None:
        options = [("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1)]
        if credentials is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            self._channel = grpc.secure_channel(address, credentials, options=options)
        self._stub = dmlserve_pb2_grpc.OperatorServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method, request, timeout):
        try:
            return method(request, timeout=self._timeout if timeout is None else timeout)
        except grpc.RpcError as error:
            raise _error_from_rpc(error) from None

    # Raw requests.

    def execute(self, request: "dmlserve_pb2.ExecuteRequest",
                timeout: Optional[float] = None) -> "dmlserve_pb2.ExecuteResponse":
        """Execute an ExecuteRequest; returns the ExecuteResponse."""
        return self._call(self._stub.Execute, request, timeout)

    def execute_stream(self, requests: Iterable["dmlserve_pb2.ExecuteRequest"],
                       timeout: Optional[float] = None
                       ) -> Iterator["dmlserve_pb2.ExecuteResponse"]:
        """Yields responses in completion order (match them by request_id).

        A failed item is a response whose `status.code` is not 0; a failed stream
        raises DmlserveError.
        """
        call = self._stub.ExecuteStream(iter(requests),
                                        timeout=self._timeout if timeout is None else timeout)
        try:
            yield from call
        except grpc.RpcError as error:
            raise _error_from_rpc(error) from None

    def stream(self, requests: Iterable["dmlserve_pb2.ExecuteRequest"],
               timeout: Optional[float] = None
               ) -> List[Union["dmlserve_pb2.ExecuteResponse", DmlserveError]]:
        """Sends all `requests` on one stream; returns, in request order, each
        ExecuteResponse or the item's DmlserveError. Missing request_ids are filled in."""
        requests = list(requests)
        index = {}
        for i, request in enumerate(requests):
            if not request.request_id:
                request.request_id = f"request-{i}"
            if request.request_id in index:
                raise ValueError(f"duplicate request_id {request.request_id!r}")
            index[request.request_id] = i
        results = [None] * len(requests)
        for response in self.execute_stream(requests, timeout):
            i = index.get(response.request_id)
            if i is None or results[i] is not None:
                raise DmlserveError(grpc.StatusCode.INTERNAL,
                                    f"unexpected response for {response.request_id!r}")
            if response.HasField("status") and response.status.code != 0:
                results[i] = DmlserveError(_CODES.get(response.status.code,
                                                      grpc.StatusCode.UNKNOWN),
                                           response.status.message, response.request_id)
            else:
                results[i] = response
        for i, result in enumerate(results):
            if result is None:
                results[i] = DmlserveError(grpc.StatusCode.INTERNAL,
                                           "the stream ended without a response",
                                           requests[i].request_id)
        return results

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
        request = dmlserve_pb2.RegisterTensorRequest(tensor=tensor)
        return self._call(self._stub.RegisterTensor, request, timeout).tensor_id

    def release(self, tensor_id: str, timeout: Optional[float] = None) -> None:
        self._call(self._stub.ReleaseTensor,
                   dmlserve_pb2.ReleaseTensorRequest(tensor_id=tensor_id), timeout)

    def info(self, timeout: Optional[float] = None) -> "dmlserve_pb2.GetServerInfoResponse":
        """The GetServerInfoResponse."""
        return self._call(self._stub.GetServerInfo, dmlserve_pb2.GetServerInfoRequest(), timeout)

    def health(self, service: str = "", timeout: Optional[float] = None) -> str:
        """One of SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN, as a string."""
        response = self._call(self._health.Check,
                              health_pb2.HealthCheckRequest(service=service), timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

