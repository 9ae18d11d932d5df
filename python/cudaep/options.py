"""Provider options: ORT-style key/value strings, validated by the library."""

import ctypes
import weakref

from . import _native


def _release_quietly(handle):
    # Runs from a finalizer (garbage collection or interpreter exit): never raise there.
    try:
        _native.CudaEpReleaseOptions(handle)
    except Exception:  # noqa: BLE001 - an already released handle is fine here
        pass


def _to_str(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Options:
    """A set of provider options, starting from the defaults (backend ``cuda``, device 0, …).

    Keyword arguments are set in order, as :meth:`set` would: ``Options(backend="sim")``.
    Values may be strings, ints or bools. Use it as a context manager, or call :meth:`close`;
    an unclosed object is released when garbage-collected.
    """

    def __init__(self, **options):
        handle = _native.Handle(0)
        _native.CudaEpCreateOptions(ctypes.byref(handle))
        self._handle = handle.value
        self._finalizer = weakref.finalize(self, _release_quietly, self._handle)
        try:
            for key, value in options.items():
                self.set(key, value)
        except BaseException:
            self.close()
            raise

    @property
    def handle(self):
        """The 64-bit handle, for passing to the C functions in :mod:`cudaep._native`."""
        return self._handle

    def set(self, key, value):
        """Validates and stores one option; raises :class:`cudaep.InvalidArgument` (naming the
        key and the allowed values) for a bad one, leaving the options unchanged."""
        _native.CudaEpSetOption(self._handle, key.encode(), _to_str(value).encode())
        return self

    def get(self, key):
        """The option's current value in canonical form (``"536870912"``, ``"true"``)."""
        return _native.two_call_string(_native.CudaEpGetOption, self._handle, key.encode())

    def close(self):
        """Releases the options. Closing twice is harmless; using them afterwards raises
        :class:`cudaep.StaleHandle`."""
        if self._finalizer.detach() is not None:
            _native.CudaEpReleaseOptions(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
