#!/usr/bin/env python3
"""run-wheel-tests.py WHEEL_DIR VERSION: the wheel layer of `make test` (`make test-wheel`).

With the one wheel `make wheel` left in WHEEL_DIR:

  1. scripts/wheel_check.py's checks (file name, dist-info, WHEEL, METADATA, every RECORD hash
     and size, no onnxruntime inside or required), and the platform tag against the newest
     GLIBC_ version `objdump -T` lists for the packaged library;
  2. Debian's wheel tool (python3-wheel: `python3 -m wheel unpack`, which refuses a member
     whose hash or size differs from RECORD, or that RECORD does not list);
  3. a fresh virtual environment (python3 -m venv, in build/wheel-venv, git-ignored) and
     `pip install --no-index` of the wheel into it: offline, nothing else installed;
  4. scripts/wheel_installed_check.py run by that environment's python from a folder outside
     the repository, without CUDAEP_LIBRARY or PYTHONPATH: both modules import from the
     installation, get_library_path() loads and exports the plugin-EP entry points, and the
     ctypes smoke test passes on the simulated device.

A tool the layer needs and lacks (objdump, the wheel module, venv's ensurepip) is installed with
apt-get when running as root on a Debian-like system (python3-wheel, python3-venv, binutils),
as scripts/require-tools.sh does for commands; otherwise the layer fails naming it. It prints
a closing line "wheel: ... ok" and exits 0 only when every step passed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "build" / "wheel-venv"
sys.path.insert(0, str(ROOT / "scripts"))
sys.dont_write_bytecode = True

import wheel_check  # noqa: E402


class LayerError(Exception):
    """A step failed; the message says which and why."""


def run(cmd, **kw):
    """Runs cmd, printing it; returns the CompletedProcess (output captured as text)."""
    print("+ " + " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def apt_install(packages, why):
    """Installs Debian packages when root with apt-get (apt-get update first); False otherwise."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return False
    print(f"run-wheel-tests: installing {' '.join(packages)} for {why}", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
    r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout[-2000:] + r.stderr[-2000:], file=sys.stderr)
    return r.returncode == 0


def objdump_glibc(library):
    """The newest GLIBC_X.Y in `objdump -T library`, as (X, Y)."""
    if shutil.which("objdump") is None and not apt_install(["binutils"], "objdump"):
        raise LayerError("objdump is required (Debian package binutils) and installing it was not possible "
                         "(that needs root and apt-get)")
    r = run(["objdump", "-T", library])
    if r.returncode != 0:
        raise LayerError(f"objdump -T {library} failed: {r.stderr.strip()}")
    found = {tuple(int(p) for p in m.split(".")[:2]) for m in re.findall(r"\bGLIBC_([0-9]+\.[0-9]+(?:\.[0-9]+)?)\b", r.stdout)}
    if not found:
        raise LayerError(f"objdump -T {library} lists no GLIBC_ version")
    return max(found)


def wheel_tool():
    """An interpreter that can run Debian's wheel tool (`-m wheel`)."""
    candidates = [sys.executable, "python3", "/usr/bin/python3"]
    for attempt in range(2):
        for py in candidates:
            if shutil.which(py) and subprocess.run([py, "-c", "import wheel.cli"], capture_output=True).returncode == 0:
                return py
        if attempt == 0 and not apt_install(["python3-wheel"], "the wheel tool"):
            break
    raise LayerError("the wheel tool is required (Debian package python3-wheel: python3 -m wheel) and no "
                     "interpreter has it; installing it was not possible (that needs root and apt-get)")


def make_venv():
    """A fresh virtual environment in VENV; returns its python."""
    shutil.rmtree(VENV, ignore_errors=True)
    r = run([sys.executable, "-m", "venv", VENV])
    if r.returncode != 0:
        # Debian's python3 keeps ensurepip (which venv needs for pip) in python3-venv.
        minor = f"python3.{sys.version_info.minor}-venv"
        shutil.rmtree(VENV, ignore_errors=True)
        if not apt_install(["python3-venv", minor], "python3 -m venv") or \
                (r := run([sys.executable, "-m", "venv", VENV])).returncode != 0:
            raise LayerError(f"{sys.executable} -m venv {VENV} failed, and installing python3-venv was not possible "
                             f"(that needs root and apt-get):\n{r.stdout}{r.stderr}")
    return VENV / "bin" / "python"


def layer(wheel_dir, version):
    wheels = sorted(Path(wheel_dir).glob("onnxruntime_ep_cudaep-*.whl"))
    if len(wheels) != 1:
        raise LayerError(f"{wheel_dir} holds {len(wheels)} onnxruntime_ep_cudaep wheels, want 1 (run make wheel)")
    whl = wheels[0]

    print(f"--- {whl.name}: PEP 427 and plugin-EP packaging checks")
    problems, facts = wheel_check.check(whl)
    if facts.get("version") != version:
        problems.append(f"the wheel's version is {facts.get('version')}, ep.Version is {version}")
    if facts.get("name") != "onnxruntime_ep_cudaep" or facts.get("metadata_name") != "onnxruntime-ep-cudaep":
        problems.append(f"the project is {facts.get('metadata_name')!r} ({facts.get('name')}), want onnxruntime-ep-cudaep")
    if problems:
        raise LayerError("the wheel fails its checks:\n  " + "\n  ".join(problems))
    major, minor = objdump_glibc(ROOT / "build" / "libcudaep.so")
    want_tag = f"py3-none-manylinux_{major}_{minor}_x86_64"
    if facts["tag"] != want_tag:
        raise LayerError(f"the wheel's tag is {facts['tag']}, but objdump says the library needs GLIBC_{major}.{minor}: "
                         f"want {want_tag}")
    print(f"  ok   {len(facts['files'])} files, RECORD hashes match, tag {facts['tag']} (objdump: GLIBC_{major}.{minor})")

    print("--- Debian's wheel tool: unpack verifies every member against RECORD")
    py = wheel_tool()
    with tempfile.TemporaryDirectory(prefix="cudaep-wheel-unpack-") as tmp:
        r = run([py, "-m", "wheel", "unpack", "-d", tmp, whl])
        if r.returncode != 0:
            raise LayerError(f"{py} -m wheel unpack refused the wheel:\n{r.stdout}{r.stderr}")
        print(f"  ok   {r.stdout.strip()}")

    print(f"--- a fresh virtual environment ({VENV.relative_to(ROOT)}), pip install --no-index")
    vpy = make_venv()
    r = run([vpy, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
             "--disable-pip-version-check", whl])
    if r.returncode != 0:
        raise LayerError(f"pip install --no-index refused the wheel:\n{r.stdout}{r.stderr}")
    print("  ok   " + (r.stdout.strip().splitlines() or ["installed"])[-1])

    print("--- the installed packages, from outside the repository, on the simulated device")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDAEP_LIBRARY", "PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="cudaep-wheel-run-") as tmp:
        r = subprocess.run([str(vpy), str(ROOT / "scripts" / "wheel_installed_check.py"), version],
                           cwd=tmp, env=env, capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        raise LayerError(f"the installed wheel fails its checks (exit {r.returncode}):\n{r.stderr}")
    summary = r.stdout.strip().splitlines()[-1].split(": ", 1)[-1]
    return whl, summary


def main(argv):
    if len(argv) != 3:
        print("usage: run-wheel-tests.py WHEEL_DIR VERSION", file=sys.stderr)
        return 2
    try:
        whl, summary = layer(argv[1], argv[2])
    except LayerError as e:
        print(f"run-wheel-tests: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"wheel: {whl.name} installed offline into {VENV.relative_to(ROOT)}; installed checks {summary}; ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
