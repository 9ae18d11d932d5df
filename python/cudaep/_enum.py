"""The Python enums of the header's C enums, built from the generated declarations so that an
enumerator appended to include/cudaep.h appears here without editing this package."""

import enum

from ._cudaep_h import ENUMS


def header_enum(name, c_name, doc, module, methods=None):
    """An enum.IntEnum called name with c_name's enumerators (without their shared prefix:
    CUDAEP_DTYPE_FLOAT32 is FLOAT32), documented by doc. methods, a plain class, adds
    properties and methods to the members."""
    cls = enum.IntEnum(name, ENUMS[c_name], module=module, qualname=name, type=methods)
    cls.__doc__ = doc
    return cls
