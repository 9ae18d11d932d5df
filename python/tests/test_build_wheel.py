"""scripts/build_wheel.py writes the onnxruntime-ep-cudaep wheel, and scripts/wheel_check.py
(the independent reader the wheel layer uses) accepts it and catches what would make it wrong:
the platform tag is the glibc the library needs (checked against objdump), libraries needing more
than glibc or lacking the plugin-EP entry points are refused, the build is reproducible, and a
tampered archive, an unlisted member, a bundled libonnxruntime or a dependency on onnxruntime
fail the check. The test libraries are compiled with cc."""

import io
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile
from pathlib import Path

from .header import ROOT
import build_wheel  # noqa: E402  (scripts/ is on sys.path through .header)
import wheel_check  # noqa: E402

LIBRARY = ROOT / "build" / "libcudaep.so"
PYTHON_DIR = ROOT / "python"
ENTRY_POINTS = "void* CreateEpFactories(void) { return 0; }\nvoid ReleaseEpFactory(void) {}\n"


def objdump_glibc(path):
    out = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=True).stdout
    found = {tuple(int(p) for p in v.split(".")[:2]) for v in re.findall(r"\bGLIBC_([0-9.]+[0-9])\b", out)}
    return max(found) if found else None


@unittest.skipUnless(LIBRARY.is_file(), "build/libcudaep.so is not built (make lib)")
class BuildWheelTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="cudaep-wheel-test-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def build(self, library=LIBRARY, version="0.1.0", out=None, **kw):
        return build_wheel.build_wheel(library, version, PYTHON_DIR, out or self.tmp / "out", **kw)

    def cc(self, name, source, *flags):
        if shutil.which("cc") is None:
            self.skipTest("no C compiler")
        src = self.tmp / f"{name}.c"
        src.write_text(source)
        out = self.tmp / f"{name}.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True, capture_output=True)
        return out

    # --- the writer ---------------------------------------------------------------------------

    def test_the_wheel_passes_the_independent_check(self):
        path = self.build()
        problems, facts = wheel_check.check(path)
        self.assertEqual(problems, [])
        self.assertEqual(facts["name"], "onnxruntime_ep_cudaep")
        self.assertEqual(facts["metadata_name"], "onnxruntime-ep-cudaep")
        self.assertEqual(facts["version"], "0.1.0")
        self.assertEqual(facts["library_size"], LIBRARY.stat().st_size)
        for src in sorted((PYTHON_DIR / "cudaep").glob("*.py")):
            self.assertIn(f"cudaep/{src.name}", facts["files"])
        self.assertIn("onnxruntime_ep_cudaep/__init__.py", facts["files"])
        with zipfile.ZipFile(path) as zf:
            self.assertEqual(zf.read("onnxruntime_ep_cudaep/libcudaep.so"), LIBRARY.read_bytes())
            meta = zf.read("onnxruntime_ep_cudaep-0.1.0.dist-info/METADATA").decode()
        self.assertNotIn("Requires-Dist", meta)

    @unittest.skipIf(shutil.which("objdump") is None, "objdump is not installed")
    def test_the_tag_is_the_glibc_objdump_sees(self):
        major, minor = objdump_glibc(LIBRARY)
        path = self.build()
        self.assertTrue(path.name.endswith(f"-py3-none-manylinux_{major}_{minor}_x86_64.whl"), path.name)
        lib = self.cc("uses_libc", ENTRY_POINTS + "#include <string.h>\n"
                      "void copy(char* d, const char* s, unsigned long n) { memcpy(d, s, n); }\n")
        self.assertEqual(build_wheel.ElfLibrary(lib).glibc_version(), objdump_glibc(lib))

    def test_a_library_without_glibc_versions_gets_the_oldest_tag(self):
        lib = self.cc("no_libc", ENTRY_POINTS, "-nostdlib")
        self.assertEqual(build_wheel.ElfLibrary(lib).needed, [])
        self.assertEqual(build_wheel.platform_tag(build_wheel.ElfLibrary(lib)), "manylinux_2_17_x86_64")

    def test_the_build_is_reproducible_and_replaces_older_wheels(self):
        out = self.tmp / "out"
        out.mkdir()
        (out / "onnxruntime_ep_cudaep-0.0.9-py3-none-manylinux_2_17_x86_64.whl").write_bytes(b"old")
        first = self.build(out=out).read_bytes()
        second = self.build(out=out)
        self.assertEqual(first, second.read_bytes())
        self.assertEqual([p.name for p in out.iterdir()], [second.name])

    def test_refusals_name_the_bad_input(self):
        cases = [
            ("version", dict(version="v0.1"), "version 'v0.1': want a PEP 440 release version"),
            ("reported version", dict(reported_version="0.2.0"),
             f"library {LIBRARY} reports version 0.2.0, not 0.1.0"),
            ("not ELF", dict(library=PYTHON_DIR / "cudaep" / "__init__.py"), "not an ELF file"),
        ]
        for what, kw, want in cases:
            with self.subTest(what):
                with self.assertRaises(build_wheel.WheelError) as cm:
                    self.build(**kw)
                self.assertIn(want, str(cm.exception))
        self.assertFalse((self.tmp / "out").exists(), "nothing is written when an input is refused")

    def test_a_library_without_the_entry_points_is_refused(self):
        lib = self.cc("no_entry", "int f(void) { return 1; }\n")
        with self.assertRaises(build_wheel.WheelError) as cm:
            self.build(library=lib)
        self.assertIn("does not export CreateEpFactories, ReleaseEpFactory", str(cm.exception))

    def test_a_library_needing_more_than_glibc_is_refused(self):
        lib = self.cc("needs_stdcxx", ENTRY_POINTS, "-Wl,--no-as-needed", "-lstdc++")
        with self.assertRaises(build_wheel.WheelError) as cm:
            self.build(library=lib)
        self.assertIn("needs libstdc++.so.6", str(cm.exception))

    def test_the_cli_checks_the_library_reports_the_version(self):
        r = subprocess.run(["python3", str(ROOT / "scripts" / "build_wheel.py"), "--library", str(LIBRARY),
                            "--version", "9.9.9", "--out", str(self.tmp / "cli")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"reports version [0-9.]+, not 9\.9\.9")

    # --- the checker --------------------------------------------------------------------------

    def rewrite(self, path, change):
        """A copy of the wheel with change(name, data) -> data or None (drop) applied, plus
        change's extra members (change.extra: {name: data})."""
        out = self.tmp / "tampered" / path.name
        out.parent.mkdir(exist_ok=True)
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                data = change(info.filename, src.read(info))
                if data is not None:
                    dst.writestr(info, data)
            for name, data in getattr(change, "extra", {}).items():
                dst.writestr(name, data)
        return out

    def problems(self, path):
        return "\n".join(wheel_check.check(path)[0])

    def test_the_checker_catches_tampering(self):
        path = self.build()
        dist = "onnxruntime_ep_cudaep-0.1.0.dist-info"

        def edit_init(name, data):
            return data + b"# edited\n" if name == "cudaep/__init__.py" else data
        self.assertIn("RECORD: cudaep/__init__.py has sha256", self.problems(self.rewrite(path, edit_init)))

        def add(extra):
            def change(name, data):
                return data
            change.extra = extra
            return change
        self.assertIn("RECORD does not list cudaep/extra.py", self.problems(self.rewrite(path, add({"cudaep/extra.py": b"x"}))))
        bundled = self.problems(self.rewrite(path, add({"onnxruntime_ep_cudaep/libonnxruntime.so.1": b"x"})))
        self.assertIn("must not bundle ONNX Runtime", bundled)

        def drop(name, data):
            return None if name == "cudaep/_native.py" else data
        dropped = self.problems(self.rewrite(path, drop))
        self.assertIn("RECORD lists cudaep/_native.py, which the archive lacks", dropped)
        self.assertIn("cudaep/_native.py is missing", dropped)

        def depend(name, data):
            if name == f"{dist}/METADATA":
                return data.replace(b"Requires-Python", b"Requires-Dist: onnxruntime>=1.23\nRequires-Python")
            return data
        self.assertIn("must not depend on onnxruntime", self.problems(self.rewrite(path, depend)))

        def purelib(name, data):
            return data.replace(b"Root-Is-Purelib: false", b"Root-Is-Purelib: true") if name == f"{dist}/WHEEL" else data
        self.assertIn("Root-Is-Purelib 'true'", self.problems(self.rewrite(path, purelib)))

        renamed = path.with_name(path.name.replace("0.1.0", "0.1.1"))
        shutil.copy(path, renamed)
        self.assertIn("dist-info folders", self.problems(renamed))

    def test_the_checker_reads_a_byte_stream_independently(self):
        """wheel_check parses the archive on its own: a wheel it accepts has a RECORD whose
        every line hashes the member's bytes (recomputed here a third way)."""
        import base64
        import hashlib
        path = self.build()
        with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
            record = zf.read("onnxruntime_ep_cudaep-0.1.0.dist-info/RECORD").decode().splitlines()
            for line in record:
                name, digest, size = line.rsplit(",", 2)
                if name.endswith("/RECORD"):
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = zf.read(name)
                want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
                self.assertEqual((digest, int(size)), (want, len(data)), name)
            self.assertEqual(len(record), len(zf.namelist()))


if __name__ == "__main__":
    unittest.main()
