"""numpy arrays <-> dmlserve.v1.Tensor messages (packed little-endian, row-major)."""

from __future__ import annotations

from typing import Union

import numpy as np
import numpy.typing as npt

from dmlserve_client._stubs import dmlserve_pb2

# dmlserve.v1.DataType -> little-endian numpy dtype.
_NUMPY_DTYPES = {
    dmlserve_pb2.FLOAT32: np.dtype("<f4"),
    dmlserve_pb2.FLOAT16: np.dtype("<f2"),
    dmlserve_pb2.FLOAT64: np.dtype("<f8"),
    dmlserve_pb2.UINT8: np.dtype("u1"),
    dmlserve_pb2.UINT16: np.dtype("<u2"),
    dmlserve_pb2.UINT32: np.dtype("<u4"),
    dmlserve_pb2.UINT64: np.dtype("<u8"),
    dmlserve_pb2.INT8: np.dtype("i1"),
    dmlserve_pb2.INT16: np.dtype("<i2"),
    dmlserve_pb2.INT32: np.dtype("<i4"),
    dmlserve_pb2.INT64: np.dtype("<i8"),
}


def data_type_of(dtype: npt.DTypeLike) -> int:
    """The dmlserve.v1.DataType for a numpy dtype (any byte order)."""
    dtype = np.dtype(dtype)
    for data_type, candidate in _NUMPY_DTYPES.items():
        if candidate.kind == dtype.kind and candidate.itemsize == dtype.itemsize:
            return data_type
    raise TypeError(f"numpy dtype {dtype} has no dmlserve data type")


def numpy_dtype(data_type: Union[str, int]) -> np.dtype:
    """The little-endian numpy dtype of a dmlserve.v1.DataType value or name."""
    if isinstance(data_type, str):
        data_type = dmlserve_pb2.DataType.Value(data_type.upper())
    try:
        return _NUMPY_DTYPES[data_type]
    except KeyError:
        raise TypeError(f"data type {data_type} has no numpy dtype") from None


def tensor_from_numpy(array: npt.ArrayLike,
                      data_type: Union[str, int, None] = None) -> "dmlserve_pb2.Tensor":
    """A Tensor holding `array` (converted to `data_type` when given)."""
    array = np.asarray(array)
    if data_type is not None:
        array = array.astype(numpy_dtype(data_type), copy=False)
    type_value = data_type_of(array.dtype)
    packed = np.ascontiguousarray(array, dtype=_NUMPY_DTYPES[type_value])
    return dmlserve_pb2.Tensor(data_type=type_value, sizes=list(array.shape),
                               data=packed.tobytes())


def tensor_ref(tensor_id: str) -> "dmlserve_pb2.Tensor":
    """A Tensor naming one kept on the server with register()."""
    return dmlserve_pb2.Tensor(tensor_id=tensor_id)


def numpy_from_tensor(tensor: "dmlserve_pb2.Tensor") -> np.ndarray:
    """The elements of `tensor` as a numpy array shaped by its sizes."""
    dtype = numpy_dtype(tensor.data_type)
    count = int(np.prod(tensor.sizes, dtype=np.uint64)) if tensor.sizes else 1
    if len(tensor.data) != count * dtype.itemsize:
        raise ValueError(f"tensor data has {len(tensor.data)} bytes; sizes "
                         f"{list(tensor.sizes)} need {count} elements of {dtype.itemsize} bytes")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(tuple(tensor.sizes)).copy()


def as_tensor(value: Union[npt.ArrayLike, "dmlserve_pb2.Tensor"],
              data_type: Union[str, int, None] = None) -> "dmlserve_pb2.Tensor":
    """Passes Tensor messages through; converts anything else with tensor_from_numpy."""
    if isinstance(value, dmlserve_pb2.Tensor):
        return value
    return tensor_from_numpy(value, data_type)
