"""Element types, numbered as ONNX's TensorProto.DataType (CudaEpDType)."""

import enum


class DType(enum.IntEnum):
    """CudaEpDType. Kernels support the types their op's row of the support matrix lists; lazy
    weights may have any of these."""

    FLOAT32 = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    BOOL = 9
    FLOAT16 = 10
    FLOAT64 = 11
    UINT32 = 12
    UINT64 = 13
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E5M2 = 19
    UINT4 = 21
    INT4 = 22

    @property
    def bits(self):
        """The element size in bits."""
        return _BITS[self]

    @property
    def itemsize(self):
        """The element size in bytes (1 for the 4-bit types, which pack two per byte)."""
        return max(_BITS[self] // 8, 1)


_BITS = {
    DType.FLOAT32: 32, DType.UINT8: 8, DType.INT8: 8, DType.UINT16: 16, DType.INT16: 16,
    DType.INT32: 32, DType.INT64: 64, DType.BOOL: 8, DType.FLOAT16: 16, DType.FLOAT64: 64,
    DType.UINT32: 32, DType.UINT64: 64, DType.BFLOAT16: 16, DType.FLOAT8E4M3FN: 8,
    DType.FLOAT8E5M2: 8, DType.UINT4: 4, DType.INT4: 4,
}

_ALIASES = {"float": DType.FLOAT32, "double": DType.FLOAT64, "half": DType.FLOAT16}


def dtype_of(value):
    """Converts a DType, its number, or its name ("float32", "int64", "bool", …) to a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        name = value.lower()
        if name in _ALIASES:
            return _ALIASES[name]
        try:
            return DType[name.upper()]
        except KeyError:
            raise ValueError(f"unknown dtype {value!r}; known: {', '.join(d.name.lower() for d in DType)}") from None
    return DType(int(value))
