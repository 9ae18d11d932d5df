"""Element types, numbered as ONNX's TensorProto.DataType (CudaEpDType)."""

from ._enum import header_enum

# The element sizes in bits, by enumerator name (the header numbers the types, not sizes).
_BITS = {
    "FLOAT32": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16, "INT32": 32, "INT64": 64, "BOOL": 8,
    "FLOAT16": 16, "FLOAT64": 64, "UINT32": 32, "UINT64": 64, "BFLOAT16": 16, "FLOAT8E4M3FN": 8,
    "FLOAT8E5M2": 8, "UINT4": 4, "INT4": 4,
}


class _DTypeMethods:
    @property
    def bits(self):
        """The element size in bits."""
        return _BITS[self.name]

    @property
    def itemsize(self):
        """The element size in bytes (1 for the 4-bit types, which pack two per byte)."""
        return max(_BITS[self.name] // 8, 1)


DType = header_enum(
    "DType", "CudaEpDType",
    "CudaEpDType. Kernels support the types their op's row of the support matrix lists; lazy weights may have "
    "any of these. ``bits`` and ``itemsize`` give the element size.",
    __name__, _DTypeMethods)

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
