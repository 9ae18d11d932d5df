"""onnxruntime_ep_cudaep, the helpers ONNX Runtime's plugin-EP packaging asks for: the EP names
are the ones the library gives ORT (capi/ort's EPName), get_library_path() names an existing
library (in the source tree: build/libcudaep.so) or fails naming what it tried, and importing the
module loads nothing and imports neither onnxruntime nor cudaep."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import onnxruntime_ep_cudaep as ep_pkg

from .header import ROOT as _ROOT  # noqa: F401  (puts scripts/ on sys.path)
import build_wheel  # noqa: E402

PYTHON_DIR = Path(__file__).resolve().parents[1]
ROOT = PYTHON_DIR.parent


class EpNamesTest(unittest.TestCase):
    def test_names_match_the_library(self):
        src = (ROOT / "capi" / "ort" / "ort.go").read_text()
        m = re.search(r'^const EPName = "([^"]+)"$', src, re.M)
        self.assertIsNotNone(m, "capi/ort/ort.go no longer declares const EPName")
        self.assertEqual(ep_pkg.get_ep_names(), [m.group(1)])
        self.assertEqual(ep_pkg.get_ep_name(), m.group(1))
        self.assertEqual(ep_pkg.get_ep_name(), "CudaEp")

    def test_names_are_a_fresh_list(self):
        names = ep_pkg.get_ep_names()
        names.append("Other")
        self.assertEqual(ep_pkg.get_ep_names(), ["CudaEp"])

    def test_all(self):
        self.assertEqual(sorted(ep_pkg.__all__), ["get_ep_name", "get_ep_names", "get_library_path"])
        self.assertEqual({n for n in dir(ep_pkg) if not n.startswith("_")}, set(ep_pkg.__all__))


class LibraryPathTest(unittest.TestCase):
    def test_source_tree_path_is_the_built_library(self):
        built = ROOT / "build" / "libcudaep.so"
        if not built.is_file():  # a carried python/ folder without the build
            with self.assertRaises(FileNotFoundError):
                ep_pkg.get_library_path()
            return
        path = ep_pkg.get_library_path()
        self.assertEqual(path, str(built))
        # Its exports, read from the file (loading a second libcudaep.so into this process would
        # start a second Go runtime when $CUDAEP_LIBRARY names another file).
        exports = build_wheel.ElfLibrary(path).exports
        for symbol in ("CreateEpFactories", "ReleaseEpFactory", "CudaEpGetVersion"):
            self.assertIn(symbol, exports)

    def copy_package(self, tmp, with_library):
        dst = Path(tmp) / "site" / "onnxruntime_ep_cudaep"
        shutil.copytree(PYTHON_DIR / "onnxruntime_ep_cudaep", dst, ignore=shutil.ignore_patterns("__pycache__"))
        if with_library:
            (dst / "libcudaep.so").write_bytes(b"not loaded by get_library_path")
        return dst

    def run_in(self, site, code):
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUDAEP_LIBRARY")}
        env["PYTHONPATH"] = str(site)
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=site, capture_output=True, text=True)

    def test_installed_layout_returns_the_library_beside_the_module(self):
        with tempfile.TemporaryDirectory() as tmp:
            pkg = self.copy_package(tmp, with_library=True)
            r = self.run_in(pkg.parent, "import onnxruntime_ep_cudaep as p; print(p.get_library_path())")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), str((pkg / "libcudaep.so").resolve()))

    def test_missing_library_names_what_was_tried(self):
        with tempfile.TemporaryDirectory() as tmp:
            pkg = self.copy_package(tmp, with_library=False)
            r = self.run_in(pkg.parent, "import onnxruntime_ep_cudaep as p; p.get_library_path()")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("FileNotFoundError", r.stderr)
            self.assertIn(f"tried {(pkg / 'libcudaep.so').resolve()}", r.stderr)
            self.assertIn("reinstall the onnxruntime-ep-cudaep wheel", r.stderr)

    @unittest.skipUnless((PYTHON_DIR.parent / "build" / "libcudaep.so").is_file(),
                         "no build/libcudaep.so in this tree (make builds it; a carried tree may not have it)")
    def test_import_loads_nothing(self):
        code = ("import sys, onnxruntime_ep_cudaep as p; p.get_library_path(); p.get_ep_names(); "
                "print(sorted(m for m in sys.modules if m.startswith(('onnxruntime', 'cudaep', 'ctypes'))))")
        r = self.run_in(PYTHON_DIR, code)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "['onnxruntime_ep_cudaep']")



class WheelOrtCheckTest(unittest.TestCase):
    """scripts/wheel_ort_check.py (the installed wheel inside ONNX Runtime, run on a GPU machine)
    says plainly when the interpreter lacks onnxruntime or numpy, and fails."""

    def test_without_onnxruntime_it_says_so_and_fails(self):
        import importlib.util
        if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("numpy"):
            self.skipTest("onnxruntime and numpy are importable: the check would run for real")
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheel_ort_check.py")], capture_output=True,
                           text=True, env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"wheel_ort_check: (numpy|onnxruntime) is not importable .*nothing ran")
        self.assertEqual(r.stdout.strip().splitlines()[-1], "wheel_ort_check: 0 passed, 0 failed (not run)")


if __name__ == "__main__":
    unittest.main()
