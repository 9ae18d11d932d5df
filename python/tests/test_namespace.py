"""The cudaep namespace is clean (what __all__ lists, __version__ and the package's submodules;
no stray imports such as ctypes or dataclasses), and __version__ is the loaded library's version,
which is ep.Version (the Makefile passes it as CUDAEP_EXPECTED_VERSION)."""

import ctypes
import os
import pkgutil
import subprocess
import sys
import shutil
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import cudaep
from cudaep import _native

PYTHON_DIR = Path(__file__).resolve().parents[1]


class NamespaceTest(unittest.TestCase):
    def test_every_public_name_is_listed_or_a_submodule(self):
        submodules = {m.name for m in pkgutil.iter_modules(cudaep.__path__)}
        public = {n for n in dir(cudaep) if not n.startswith("_")}
        stray = public - set(cudaep.__all__) - submodules
        self.assertEqual(stray, set(), "names in cudaep's namespace that are neither in __all__ nor submodules")

    def test_no_stray_standard_library_modules(self):
        for name in ("ctypes", "dataclasses", "os", "Path"):
            self.assertNotIn(name, dir(cudaep), f"cudaep.{name} leaks an import")

    def test_all_names_exist_and_are_unique(self):
        self.assertEqual(len(cudaep.__all__), len(set(cudaep.__all__)))
        for name in cudaep.__all__:
            self.assertTrue(hasattr(cudaep, name), f"__all__ lists {name}, which cudaep lacks")

    def test_star_import_gives_exactly_all(self):
        ns = {}
        exec("from cudaep import *", ns)
        self.assertEqual(set(ns) - {"__builtins__"}, set(cudaep.__all__))


class VersionTest(unittest.TestCase):
    def test_version_is_the_library_version(self):
        self.assertIsInstance(cudaep.__version__, str)
        self.assertEqual(cudaep.__version__, cudaep.version()[1])
        # Straight from the library, not through the module's own call.
        out = ctypes.c_char_p()
        _native.CudaEpGetVersion(None, ctypes.byref(out))
        self.assertEqual(cudaep.__version__, out.value.decode())

    def test_version_is_ep_version(self):
        want = os.environ.get("CUDAEP_EXPECTED_VERSION")
        if not want:
            self.skipTest("CUDAEP_EXPECTED_VERSION is unset (make test-python sets it to ep.Version)")
        self.assertEqual(cudaep.__version__, want)

    def test_version_follows_the_loaded_library_not_a_constant(self):
        src = (PYTHON_DIR / "cudaep" / "__init__.py").read_text()
        self.assertNotRegex(src, r"__version__\s*=\s*['\"]", "__version__ must come from the library")


class LoaderTest(unittest.TestCase):
    """_native's search order: $CUDAEP_LIBRARY, the source tree's build/, the wheel's library
    beside the package, the dynamic loader; a failure names every place tried."""

    def test_source_tree_order(self):
        root = PYTHON_DIR.parent
        with mock.patch.dict(os.environ, {"CUDAEP_LIBRARY": "/x/libcudaep.so"}):
            got = list(_native._candidates())
        self.assertEqual(got[:3], ["/x/libcudaep.so", str(root / "build" / "libcudaep.so"),
                                   str(PYTHON_DIR / "onnxruntime_ep_cudaep" / "libcudaep.so")])
        with mock.patch.dict(os.environ, {"CUDAEP_LIBRARY": ""}):
            self.assertEqual(list(_native._candidates())[0], str(root / "build" / "libcudaep.so"))

    def test_failure_names_every_place_tried(self):
        env = {k: v for k, v in os.environ.items() if k != "CUDAEP_LIBRARY"}
        env["CUDAEP_LIBRARY"] = "/nonexistent/libcudaep.so"
        env["PYTHONPATH"] = str(PYTHON_DIR)
        env["LD_LIBRARY_PATH"] = ""
        # A copy of the package outside the source tree, so only the env path, the wheel
        # location beside it and the dynamic loader are tried.
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(PYTHON_DIR / "cudaep", Path(tmp) / "cudaep",
                            ignore=shutil.ignore_patterns("__pycache__"))
            env["PYTHONPATH"] = tmp
            r = subprocess.run([sys.executable, "-c", "import cudaep"], env=env, cwd=tmp,
                               capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot load libcudaep.so; tried: /nonexistent/libcudaep.so (no such file)", r.stderr)
        self.assertIn("onnxruntime_ep_cudaep/libcudaep.so (no such file)", r.stderr)
        self.assertIn("set CUDAEP_LIBRARY", r.stderr)


if __name__ == "__main__":
    unittest.main()
