#!/usr/bin/env python3
"""build_wheel.py: write the onnxruntime-ep-cudaep wheel (`make wheel`).

    python3 scripts/build_wheel.py --library build/libcudaep.so --version 0.1.0 \\
        [--python-dir python] [--out build/wheel]

A wheel (PEP 427) is a zip archive with a ``NAME-VERSION.dist-info/`` folder holding METADATA,
WHEEL and RECORD (every file's sha256 and size). This writer needs only Python's standard
library: the machines that build cudaep have no setuptools ``bdist_wheel`` and no package index,
and the layout is small enough to write directly. The archive holds

    onnxruntime_ep_cudaep/__init__.py     get_library_path(), get_ep_names(), get_ep_name()
    onnxruntime_ep_cudaep/libcudaep.so    the library (C ABI and ONNX Runtime plugin EP)
    cudaep/*.py                           the ctypes bindings, which load that same file
    onnxruntime_ep_cudaep-VERSION.dist-info/{METADATA,WHEEL,top_level.txt,RECORD}

and nothing of ONNX Runtime: no libonnxruntime, no dependency on the onnxruntime package (ONNX
Runtime's packaging guidance for plugin EPs).

The platform tag is read from the library, not assumed: ``manylinux_X_Y_x86_64`` where X.Y is the
newest ``GLIBC_X.Y`` symbol version the library needs (PEP 600), and the library must need no
shared library beyond glibc's own (libc, libm, libdl, librt, libpthread), which every manylinux
system has; anything else is refused, since this writer does not graft libraries in as
auditwheel would. The library must export the plugin-EP entry points ``CreateEpFactories`` and
``ReleaseEpFactory``. The version is ep.Version (the Makefile reads it from ep/*.go); the writer
loads the library and refuses a library that reports another version.

The archive is reproducible: entries in a fixed order with a fixed timestamp, so two builds of
the same inputs are byte-identical. It prints the wheel's path.

Exit status: 0 on success, 1 when an input is refused (the message names it), 2 for bad flags.
"""

import argparse
import base64
import ctypes
import hashlib
import io
import re
import struct
import sys
import zipfile
from pathlib import Path

DIST_NAME = "onnxruntime-ep-cudaep"  # the project name: onnxruntime-ep-<id>, as ORT's guidance asks
PACKAGE = "onnxruntime_ep_cudaep"  # the import name, and the wheel's file-name form of DIST_NAME
LIBRARY_NAME = "libcudaep.so"
BINDINGS = "cudaep"
EP_ENTRY_POINTS = ("CreateEpFactories", "ReleaseEpFactory")
REQUIRES_PYTHON = ">=3.8"
PROJECT_URL = "https://github.com/cudaep/cudaep"

#: Shared libraries a manylinux wheel may need without bundling them, as far as this writer
#: checks: glibc's own. (PEP 599's list is longer; anything else should go through auditwheel.)
GLIBC_LIBRARIES = frozenset({"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
                             "ld-linux-x86-64.so.2"})
#: The oldest glibc a manylinux tag names (manylinux2014, glibc 2.17).
MANYLINUX_FLOOR = (2, 17)

#: Every entry's timestamp: the earliest a zip can hold, so that rebuilds are byte-identical.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$")


class WheelError(Exception):
    """An input the writer refuses; the message names it and what is wrong with it."""


# --- the library: what an ELF shared object needs and exports ---------------------------------

SHT_DYNSYM, SHT_DYNAMIC, SHT_GNU_VERNEED = 11, 6, 0x6FFFFFFE
DT_NULL, DT_NEEDED = 0, 1
EM_X86_64, ET_DYN = 62, 3


class ElfLibrary:
    """What the dynamic linker reads from a shared object: the libraries it needs (DT_NEEDED),
    the symbol versions it needs from each (``.gnu.version_r``) and the symbols it defines
    (``.dynsym``). Read from the section headers of a little-endian ELF64 x86-64 file.

    # Errors

    ``WheelError`` when the file is not such a shared object.
    """

    def __init__(self, path):
        self.path = Path(path)
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise WheelError(f"library {self.path}: {e.strerror}") from e
        if data[:4] != b"\x7fELF":
            raise WheelError(f"library {self.path}: not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise WheelError(f"library {self.path}: not a little-endian 64-bit ELF file")
        e_type, e_machine = struct.unpack_from("<HH", data, 16)
        if e_machine != EM_X86_64:
            raise WheelError(f"library {self.path}: machine {e_machine}, want x86-64 ({EM_X86_64})")
        if e_type != ET_DYN:
            raise WheelError(f"library {self.path}: ELF type {e_type}, want a shared object ({ET_DYN})")
        e_shoff, = struct.unpack_from("<Q", data, 40)
        e_shentsize, e_shnum = struct.unpack_from("<HH", data, 58)
        sections = []
        for i in range(e_shnum):
            (_, sh_type, _, _, sh_offset, sh_size, sh_link, sh_info, _, sh_entsize) = struct.unpack_from(
                "<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
            sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info, sh_entsize))

        def string(section, offset):
            start = sections[section][1] + offset
            return data[start:data.index(b"\0", start)].decode()

        self.needed, self.exports, self.version_needs = [], set(), {}
        for sh_type, off, size, link, info, entsize in sections:
            if sh_type == SHT_DYNAMIC:
                for pos in range(off, off + size, 16):
                    tag, val = struct.unpack_from("<qQ", data, pos)
                    if tag == DT_NULL:
                        break
                    if tag == DT_NEEDED:
                        self.needed.append(string(link, val))
            elif sh_type == SHT_DYNSYM:
                for pos in range(off + entsize, off + size, entsize):  # entry 0 is the null symbol
                    st_name, st_info, _, st_shndx = struct.unpack_from("<IBBH", data, pos)
                    if st_shndx != 0 and st_info >> 4 in (1, 2):  # defined, GLOBAL or WEAK
                        self.exports.add(string(link, st_name))
            elif sh_type == SHT_GNU_VERNEED:
                pos = off
                for _ in range(info):  # sh_info: the number of Verneed entries
                    _, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, pos)
                    names, aux = [], pos + vn_aux
                    for _ in range(vn_cnt):
                        _, _, _, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
                        names.append(string(link, vna_name))
                        aux += vna_next
                    self.version_needs.setdefault(string(link, vn_file), []).extend(names)
                    pos += vn_next

    def glibc_version(self):
        """The newest ``GLIBC_X.Y`` version the library needs, as ``(X, Y)``; None if none."""
        found = [tuple(int(p) for p in m.group(1).split("."))
                 for names in self.version_needs.values() for n in names
                 for m in [re.fullmatch(r"GLIBC_([0-9]+\.[0-9]+)(?:\.[0-9]+)?", n)] if m]
        return max(found) if found else None


def platform_tag(lib):
    """The manylinux platform tag for ``lib`` (an :class:`ElfLibrary`), e.g.
    ``manylinux_2_34_x86_64``: the newest glibc symbol version it needs, at least 2.17.

    # Errors

    ``WheelError`` when the library needs a shared library other than glibc's.
    """
    foreign = [n for n in lib.needed if n not in GLIBC_LIBRARIES]
    if foreign:
        raise WheelError(f"library {lib.path} needs {', '.join(foreign)}: a manylinux wheel may need only "
                         f"glibc's libraries ({', '.join(sorted(GLIBC_LIBRARIES))}) unless it bundles the rest, "
                         "which this writer does not do")
    major, minor = max(lib.glibc_version() or MANYLINUX_FLOOR, MANYLINUX_FLOOR)
    return f"manylinux_{major}_{minor}_x86_64"


def library_version(path):
    """The version ``CudaEpGetVersion`` of the library at ``path`` reports (loads the library).

    # Errors

    ``WheelError`` when the library cannot be loaded or the call fails.
    """
    try:
        lib = ctypes.CDLL(str(Path(path).resolve()))
        fn = lib.CudaEpGetVersion
    except (OSError, AttributeError) as e:
        raise WheelError(f"library {path}: cannot load it or find CudaEpGetVersion: {e}") from e
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_char_p)]
    abi, version = ctypes.c_uint32(0), ctypes.c_char_p()
    if fn(ctypes.byref(abi), ctypes.byref(version)) or not version.value:
        raise WheelError(f"library {path}: CudaEpGetVersion failed")
    return version.value.decode()


# --- the wheel ------------------------------------------------------------------------------


def record_hash(data):
    """RECORD's hash field for ``data``: ``sha256=`` and the urlsafe base64 digest, unpadded."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata_text(version):
    """The METADATA file (core metadata 2.1). No Requires-Dist: the package needs nothing, and
    in particular not onnxruntime."""
    description = f"""\
# onnxruntime-ep-cudaep

cudaep, a CUDA execution provider written in Go, as an ONNX Runtime plugin execution provider
and as a ctypes package. One install gives both front ends:

```python
import onnxruntime as ort
import onnxruntime_ep_cudaep as cudaep_ep

ort.register_execution_provider_library("cudaep", cudaep_ep.get_library_path())
devices = [d for d in ort.get_ep_devices() if d.ep_name == cudaep_ep.get_ep_name()]
```

and `import cudaep` (the ctypes bindings of the C ABI, loading the same `libcudaep.so`).
ONNX Runtime (1.23 or later) is installed separately; this package neither depends on it nor
bundles it. The environment variable `CUDAEP_BACKEND` (`cuda`, the default, `sim` or `auto`),
read when the library is registered, chooses the device implementation ONNX Runtime gets.
See {PROJECT_URL}.
"""
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST_NAME}\n"
        f"Version: {version}\n"
        "Summary: cudaep: a CUDA execution provider as an ONNX Runtime plugin EP and a ctypes package\n"
        f"Home-page: {PROJECT_URL}\n"
        f"Project-URL: Source, {PROJECT_URL}\n"
        "Keywords: onnxruntime,execution-provider,cuda,plugin-ep\n"
        "Platform: Linux x86-64\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Programming Language :: Python :: 3\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + description)


def wheel_text(tag):
    """The WHEEL file: a platform wheel (Root-Is-Purelib false) for any Python 3."""
    return ("Wheel-Version: 1.0\n"
            "Generator: cudaep scripts/build_wheel.py\n"
            "Root-Is-Purelib: false\n"
            f"Tag: py3-none-{tag}\n")


def wheel_name(version, tag):
    """The wheel's file name (PEP 427): ``onnxruntime_ep_cudaep-VERSION-py3-none-TAG.whl``."""
    return f"{PACKAGE}-{version}-py3-none-{tag}.whl"


def package_files(python_dir, library):
    """The files of the two packages, as (path in the wheel, bytes, executable) in wheel order:
    the helper package and its library, then the bindings (every ``cudaep/*.py``).

    # Errors

    ``WheelError`` when a package folder or its ``__init__.py`` is missing.
    """
    python_dir = Path(python_dir)
    files = []
    for pkg in (PACKAGE, BINDINGS):
        folder = python_dir / pkg
        if not (folder / "__init__.py").is_file():
            raise WheelError(f"package {folder}: no __init__.py (is --python-dir {python_dir} the repository's python/?)")
        for src in sorted(folder.glob("*.py")):
            files.append((f"{pkg}/{src.name}", src.read_bytes(), False))
        if pkg == PACKAGE:
            files.append((f"{PACKAGE}/{LIBRARY_NAME}", Path(library).read_bytes(), True))
    return files


def _zip_entry(zf, name, data, executable):
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # Unix, so that the mode bits below are read
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    zf.writestr(info, data)


def build_wheel(library, version, python_dir, out_dir, reported_version=None):
    """Writes the wheel into ``out_dir`` and returns its path. ``reported_version``, when given,
    is the version the library itself reports, which must equal ``version``.

    Wheels of this project already in ``out_dir`` are removed first, so the folder holds exactly
    one. Nothing is written when an input is refused.

    # Errors

    ``WheelError`` naming the bad input: a version that is not a release version, a library
    that reports another version, is not an x86-64 ELF shared object, needs a non-glibc library
    or lacks a plugin-EP entry point, or a missing package folder.
    """
    if not _VERSION_RE.match(version or ""):
        raise WheelError(f"version {version!r}: want a PEP 440 release version such as 0.1.0 (ep.Version)")
    if reported_version is not None and reported_version != version:
        raise WheelError(f"library {library} reports version {reported_version}, not {version}: "
                         "rebuild it (make lib) or fix ep.Version")
    lib = ElfLibrary(library)
    missing = [s for s in EP_ENTRY_POINTS if s not in lib.exports]
    if missing:
        raise WheelError(f"library {library} does not export {', '.join(missing)}: not an ONNX Runtime plugin EP library")
    tag = platform_tag(lib)
    files = package_files(python_dir, library)

    dist_info = f"{PACKAGE}-{version}.dist-info"
    files += [
        (f"{dist_info}/METADATA", metadata_text(version).encode(), False),
        (f"{dist_info}/WHEEL", wheel_text(tag).encode(), False),
        (f"{dist_info}/top_level.txt", f"{BINDINGS}\n{PACKAGE}\n".encode(), False),
    ]
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data, _ in files)
    record += f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), False))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, executable in files:
            _zip_entry(zf, name, data, executable)

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(f"{PACKAGE}-*.whl"):
        old.unlink()
    path = out_dir / wheel_name(version, tag)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the onnxruntime-ep-cudaep wheel.")
    ap.add_argument("--library", required=True, help="libcudaep.so to package (build/libcudaep.so)")
    ap.add_argument("--version", required=True, help="the package version: ep.Version")
    ap.add_argument("--python-dir", default=str(Path(__file__).resolve().parents[1] / "python"),
                    help="the folder holding cudaep/ and onnxruntime_ep_cudaep/ (default: the repository's python/)")
    ap.add_argument("--out", default="build/wheel", help="the folder to write the wheel into (default build/wheel)")
    args = ap.parse_args(argv)
    try:
        path = build_wheel(args.library, args.version, args.python_dir, args.out, library_version(args.library))
    except WheelError as e:
        print(f"build_wheel: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
