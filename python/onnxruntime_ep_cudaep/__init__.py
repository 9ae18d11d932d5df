"""onnxruntime_ep_cudaep: cudaep's ONNX Runtime plugin execution provider, packaged as ONNX
Runtime asks plugin EPs to be (the ``onnxruntime-ep-cudaep`` wheel, ``make wheel``).

>>> import onnxruntime as ort
>>> import onnxruntime_ep_cudaep as cudaep_ep
>>> ort.register_execution_provider_library("cudaep", cudaep_ep.get_library_path())
>>> devices = [d for d in ort.get_ep_devices() if d.ep_name == cudaep_ep.get_ep_name()]

The wheel holds ``libcudaep.so`` in this package's folder, and the ctypes bindings (``import
cudaep``), which load the same file. Importing this module loads nothing and imports neither
``onnxruntime`` nor ``cudaep``: it only names the library and the EP. The package does not depend
on ``onnxruntime`` and never bundles ``libonnxruntime``; install ONNX Runtime (1.23 or later)
separately.

Which device implementation ONNX Runtime gets is chosen by the environment variable
``CUDAEP_BACKEND`` when the library is registered: ``cuda`` (the default), ``sim`` (the
simulated device) or ``auto`` (docs/ORT.md, "Backend selection").
"""

from pathlib import Path as _Path

__all__ = ["get_ep_name", "get_ep_names", "get_library_path"]

#: The library's file name; the wheel installs it beside this file.
_LIBRARY_NAME = "libcudaep.so"

#: The EP names the library's factories give ONNX Runtime (capi/ort's EPName).
_EP_NAMES = ("CudaEp",)


def _candidates():
    here = _Path(__file__).resolve().parent
    yield here / _LIBRARY_NAME
    # The source tree (python/onnxruntime_ep_cudaep): the library `make` builds.
    if here.parent.name == "python":
        yield here.parents[1] / "build" / _LIBRARY_NAME


def get_library_path():
    """The absolute path of ``libcudaep.so``, for ``register_execution_provider_library``.

    It is the library installed in this package's folder by the wheel; in a source tree (this
    module imported from the repository's ``python/`` folder) it is ``build/libcudaep.so``. The
    path names a file that exists when the function returns; the library is not loaded.

    # Errors

    ``FileNotFoundError`` naming every path tried, when none exists (in a source tree: run
    ``make`` first).
    """
    tried = []
    for path in _candidates():
        if path.is_file():
            return str(path)
        tried.append(str(path))
    raise FileNotFoundError(
        "onnxruntime_ep_cudaep: libcudaep.so not found; tried " + ", ".join(tried)
        + " (in a source tree, build it with `make`; otherwise reinstall the onnxruntime-ep-cudaep wheel)")


def get_ep_names():
    """The names of the execution providers the library offers, as ONNX Runtime lists them in
    ``OrtEpDevice.ep_name``: ``["CudaEp"]``. A new list on every call."""
    return list(_EP_NAMES)


def get_ep_name():
    """The name of the library's one execution provider, ``"CudaEp"`` (``get_ep_names()[0]``)."""
    return _EP_NAMES[0]
