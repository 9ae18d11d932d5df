#!/usr/bin/env python3
"""wheel_installed_check.py VERSION: check an installed onnxruntime-ep-cudaep wheel from the
interpreter it was installed into (scripts/run-wheel-tests.py runs it with a fresh virtual
environment's python, from a folder outside the repository, without CUDAEP_LIBRARY or
PYTHONPATH, so nothing of the source tree can stand in for the installed files).

It imports both modules from the installation, checks that get_library_path() names the
installed library, that the file loads and exports the plugin-EP entry points CreateEpFactories
and ReleaseEpFactory, that the ctypes bindings loaded that same file, that every version is
VERSION, and runs the ctypes smoke test on the simulated device (backend "sim"): an upload, a
Relu kernel, a captured and replayed graph, no handle left live. It prints one line per check
and a summary, and exits 1 when a check fails.
"""

import array
import ctypes
import importlib.metadata
import os
import sys
import sysconfig
from pathlib import Path

results = []


def check(what, cond, detail=""):
    results.append(bool(cond))
    print(f"  {'ok  ' if cond else 'FAIL'} {what}{': ' + detail if detail and not cond else ''}")
    return bool(cond)


def inside(path, folder):
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False


def main(argv):
    if len(argv) != 2:
        print("usage: wheel_installed_check.py VERSION", file=sys.stderr)
        return 2
    version = argv[1]
    site = sysconfig.get_paths()["platlib"]
    print(f"wheel_installed_check: {sys.executable} (prefix {sys.prefix}), site-packages {site}")
    check("CUDAEP_LIBRARY is unset (the bindings must find the installed library themselves)",
          "CUDAEP_LIBRARY" not in os.environ)

    import onnxruntime_ep_cudaep as ep_pkg

    check("onnxruntime_ep_cudaep is imported from the installation", inside(ep_pkg.__file__, site), ep_pkg.__file__)
    check("importing it imports neither onnxruntime nor cudaep",
          "onnxruntime" not in sys.modules and "cudaep" not in sys.modules,
          f"{sorted(m for m in sys.modules if m.startswith(('onnxruntime', 'cudaep')))}")
    path = ep_pkg.get_library_path()
    check("get_library_path() is the absolute path of the installed libcudaep.so",
          os.path.isabs(path) and os.path.isfile(path) and inside(path, Path(ep_pkg.__file__).parent)
          and Path(path).name == "libcudaep.so", path)
    check('get_ep_names() == ["CudaEp"]', ep_pkg.get_ep_names() == ["CudaEp"], repr(ep_pkg.get_ep_names()))
    check('get_ep_name() == "CudaEp"', ep_pkg.get_ep_name() == "CudaEp", repr(ep_pkg.get_ep_name()))
    try:
        lib = ctypes.CDLL(path)
        entry = {name: hasattr(lib, name) for name in ("CreateEpFactories", "ReleaseEpFactory")}
    except OSError as e:
        entry = {"load": False}
        print(f"       {e}")
    check("the library loads and exports CreateEpFactories and ReleaseEpFactory", all(entry.values()), repr(entry))
    check(f"the distribution's version is {version}",
          importlib.metadata.version("onnxruntime-ep-cudaep") == version,
          importlib.metadata.version("onnxruntime-ep-cudaep"))

    import cudaep
    from cudaep import _native

    check("cudaep is imported from the installation", inside(cudaep.__file__, site), cudaep.__file__)
    check("the bindings loaded get_library_path()'s file", os.path.samefile(_native.lib._name, path),
          f"{_native.lib._name} vs {path}")
    check(f"cudaep.__version__ is {version}", cudaep.__version__ == version, cudaep.__version__)
    check("cudaep.version() reports the header's ABI", cudaep.version() == (_native.ABI_VERSION, version),
          repr(cudaep.version()))

    # The smoke test on the simulated device: distinct non-zero values, both signs.
    xs = array.array("f", [1.5, -2.25, 3.0, -4.5, 0.75, -0.125, 6.0, -7.5])
    want = array.array("f", [max(v, 0.0) for v in xs])
    with cudaep.Provider(backend="sim") as p:
        check("a sim provider reports backend sim", p.backend_name == "sim", p.backend_name)
        x = p.upload(xs)
        y = p.alloc(4 * len(xs))
        y.write(array.array("f", [9.0] * len(xs)))
        relu = p.kernel("Relu", [("float32", (len(xs),))])
        relu([x.view("float32", (len(xs),))], [y.view("float32", (len(xs),))])
        got = array.array("f", y.read())
        check("Relu on the simulated device matches the host", got == want, f"{list(got)} vs {list(want)}")
        x.write(array.array("f", [-v for v in xs]))
        with p.capture(cudaep.Slot.PRIMARY, [relu], [x, y]):
            relu([x.view("float32", (len(xs),))], [y.view("float32", (len(xs),))])
        p.replay(cudaep.Slot.PRIMARY)
        got = array.array("f", y.read())
        want = array.array("f", [max(-v, 0.0) for v in xs])
        check("the captured Relu replays on new inputs", got == want, f"{list(got)} vs {list(want)}")
        for obj in (relu, x, y):
            obj.close()
    import gc

    gc.collect()
    check("no library handle is left live", cudaep.live_handle_count() == 0, str(cudaep.live_handle_count()))

    failed = results.count(False)
    print(f"wheel_installed_check: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
