"""Python client for dmlserve (DirectML-semantics tensor operators over gRPC).

Installed with `pip install ./client/python` it carries its own generated stubs; used from
this repository's tree it takes the build's (see dmlserve_client/_stubs.py).
"""

from dmlserve_client.client import Client
from dmlserve_client.client import DmlserveError
from dmlserve_client.client import tls_credentials
from dmlserve_client.tensors import data_type_of
from dmlserve_client.tensors import numpy_dtype
from dmlserve_client.tensors import numpy_from_tensor
from dmlserve_client.tensors import tensor_from_numpy
from dmlserve_client.tensors import tensor_ref

__all__ = ["Client", "DmlserveError", "data_type_of", "numpy_dtype", "numpy_from_tensor",
           "tensor_from_numpy", "tensor_ref", "tls_credentials"]
