#!/usr/bin/env python3
"""wheel_check.py WHEEL: check a wheel against PEP 427 and what ONNX Runtime asks of a plugin-EP
package, independently of the writer (scripts/build_wheel.py): it parses the archive itself.

Checked: the file name's five parts; one ``NAME-VERSION.dist-info`` folder matching them; WHEEL
(Wheel-Version 1.x, Root-Is-Purelib false, the Tag of the file name); METADATA (Name and Version
of the file name, no dependency on onnxruntime); RECORD (every archive member listed once with its
sha256 and size, nothing listed that the archive lacks, RECORD itself without a hash); no
libonnxruntime anywhere in the archive; the plugin-EP library and both packages present, the
library's mode executable. Standard library only.

Exit status: 0 when the wheel passes (it prints a summary), 1 listing every problem found.
"""

import base64
import email.parser
import hashlib
import re
import sys
import zipfile
from pathlib import PurePosixPath

REQUIRED = ("onnxruntime_ep_cudaep/__init__.py", "onnxruntime_ep_cudaep/libcudaep.so", "cudaep/__init__.py",
            "cudaep/_native.py", "cudaep/_cudaep_h.py")
LIBRARY = "onnxruntime_ep_cudaep/libcudaep.so"


def normalize(name):
    """PEP 503 normalization, as pip compares project names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def check(path):
    """Returns ``(problems, facts)`` for the wheel at ``path``: a list of strings naming what is
    wrong (empty when it passes) and a dict (name, version, tag, files, library_size)."""
    problems, facts = [], {}
    base = PurePosixPath(str(path)).name
    m = re.fullmatch(r"([^-]+)-([^-]+)-([^-]+)-([^-]+)-([^-]+)\.whl", base)
    if not m:
        return [f"{base}: not a wheel file name (NAME-VERSION-PYTHON-ABI-PLATFORM.whl)"], facts
    name, version, py, abi, plat = m.groups()
    tag = f"{py}-{abi}-{plat}"
    facts.update(name=name, version=version, tag=tag)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        return [f"{base}: cannot open it as a zip archive: {e}"], facts
    with zf:
        members = [i for i in zf.infolist() if not i.is_dir()]
        names = [i.filename for i in members]
        facts["files"] = names
        dist_infos = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
        want_dist = f"{name}-{version}.dist-info"
        if dist_infos != [want_dist]:
            problems.append(f"dist-info folders {dist_infos}, want exactly [{want_dist}]")
            return problems, facts

        def text(member):
            try:
                return zf.read(f"{want_dist}/{member}").decode("utf-8")
            except KeyError:
                problems.append(f"{want_dist}/{member} is missing")
                return ""

        wheel = email.parser.Parser().parsestr(text("WHEEL"))
        if not (wheel.get("Wheel-Version") or "").startswith("1."):
            problems.append(f"WHEEL: Wheel-Version {wheel.get('Wheel-Version')!r}, want 1.x")
        if (wheel.get("Root-Is-Purelib") or "").lower() != "false":
            problems.append(f"WHEEL: Root-Is-Purelib {wheel.get('Root-Is-Purelib')!r}, want false (a platform wheel)")
        if wheel.get_all("Tag") != [tag]:
            problems.append(f"WHEEL: Tag {wheel.get_all('Tag')}, want [{tag!r}] (the file name's)")

        meta = email.parser.Parser().parsestr(text("METADATA"))
        if normalize(meta.get("Name") or "") != normalize(name):
            problems.append(f"METADATA: Name {meta.get('Name')!r} does not match the file name's {name!r}")
        if meta.get("Version") != version:
            problems.append(f"METADATA: Version {meta.get('Version')!r}, the file name says {version!r}")
        for req in meta.get_all("Requires-Dist") or []:
            if normalize(re.split(r"[ ;<>=!~\[(]", req.strip(), 1)[0]).startswith("onnxruntime"):
                problems.append(f"METADATA: Requires-Dist {req!r}: a plugin-EP package must not depend on onnxruntime")
        facts["metadata_name"] = meta.get("Name")

        record_name = f"{want_dist}/RECORD"
        listed = {}
        for line in text("RECORD").splitlines():
            if not line:
                continue
            parts = line.rsplit(",", 2)
            if len(parts) != 3:
                problems.append(f"RECORD: malformed line {line!r}")
                continue
            if parts[0] in listed:
                problems.append(f"RECORD: {parts[0]} is listed twice")
            listed[parts[0]] = (parts[1], parts[2])
        for n in names:
            if n not in listed:
                problems.append(f"RECORD does not list {n}")
                continue
            digest, size = listed[n]
            if n == record_name:
                if digest or size:
                    problems.append("RECORD lists a hash or size for itself (want RECORD,,)")
                continue
            data = zf.read(n)
            algo, _, want = digest.partition("=")
            if algo != "sha256":
                problems.append(f"RECORD: {n} has hash {digest!r}, want sha256=…")
                continue
            got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if got != want:
                problems.append(f"RECORD: {n} has sha256 {want}, the archive's bytes hash to {got}")
            if size != str(len(data)):
                problems.append(f"RECORD: {n} has size {size}, the archive holds {len(data)} bytes")
        for n in listed:
            if n not in names:
                problems.append(f"RECORD lists {n}, which the archive lacks")

        for n in names:
            if "libonnxruntime" in PurePosixPath(n).name:
                problems.append(f"{n}: a plugin-EP package must not bundle ONNX Runtime")
        for n in REQUIRED:
            if n not in names:
                problems.append(f"{n} is missing")
        if LIBRARY in names:
            info = zf.getinfo(LIBRARY)
            facts["library_size"] = info.file_size
            if not (info.external_attr >> 16) & 0o111:
                problems.append(f"{LIBRARY} is not executable (mode {oct(info.external_attr >> 16)})")
    return problems, facts


def main(argv):
    if len(argv) != 2:
        print("usage: wheel_check.py WHEEL", file=sys.stderr)
        return 2
    problems, facts = check(argv[1])
    if problems:
        for p in problems:
            print(f"wheel_check: {p}", file=sys.stderr)
        return 1
    print(f"wheel_check: {PurePosixPath(argv[1]).name}: {len(facts['files'])} files, RECORD hashes match, "
          f"tag {facts['tag']}, no onnxruntime inside or required")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
