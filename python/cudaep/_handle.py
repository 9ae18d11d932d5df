"""The base of every object that owns a library handle."""

import weakref


def _release_quietly(release, handle):
    # Runs from a finalizer (garbage collection or interpreter exit): never raise there.
    try:
        release(handle)
    except Exception:  # noqa: BLE001 - an already released handle is fine here
        pass


class HandleObject:
    """An object that owns one library handle. It is a context manager; :meth:`close` releases
    the handle (twice is harmless), and an object that is never closed is released by a
    finalizer when it is garbage-collected. Using it after :meth:`close` raises
    :class:`cudaep.StaleHandle` (the library refuses the released handle)."""

    def _own(self, handle, release):
        self._handle = handle
        self._release = release
        self._finalizer = weakref.finalize(self, _release_quietly, release, handle)

    @property
    def handle(self):
        """The 64-bit handle, for passing to the C functions in :mod:`cudaep._native`."""
        return self._handle

    @property
    def closed(self):
        """Whether :meth:`close` was called."""
        return not self._finalizer.alive

    def close(self):
        """Releases the handle. Closing twice is harmless."""
        if self._finalizer.detach() is not None:
            self._release(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"handle=0x{self._handle:016x}"
        return f"<cudaep.{type(self).__name__} {state}>"
