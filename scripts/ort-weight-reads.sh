#!/usr/bin/env bash
# ort-weight-reads.sh: who reads a 2 GiB external-data file, ORT or CudaEp, while a CudaEp-only
# session is created and run (ctests/ort/case_weight_reads.c), with strace's view of ORT's opens,
# mappings and reads of the file. After `make test-ort` (the host and ORT 1.30.0):
#
#   scripts/ort-weight-reads.sh [MIB]       # default 2048; CUDAEP_BACKEND as for the ort layer
#
# It writes the model into build/weight-reads (MIB MiB of disk), prints the case's table and
# checks, then a summary of the file's system calls per process phase.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-2048}
dir=build/weight-reads
H=build/ctest-ort/ctests/ort/ort_host
export CUDAEP_ORT_LIBRARY=${CUDAEP_ORT_LIBRARY:-$PWD/.cache/ort/1.30.0/libonnxruntime.so.1}
export CUDAEP_LIBRARY=${CUDAEP_LIBRARY:-$PWD/build/libcudaep.so}
export CUDAEP_BACKEND=${CUDAEP_BACKEND:-sim}
[ -x "$H" ] || { echo "error: $H is missing: run make test-ort first" >&2; exit 1; }
scripts/require-tools.sh strace:strace
mkdir -p "$dir"
python3 ctests/ort/gen_models.py --weight-reads-mib "$mib" "$dir"
log=$dir/strace.log
status=0
strace -f -qq -e trace=openat,mmap,munmap,read,pread64,close,access -o "$log" "$H" weight_reads "$dir" || status=$?
# The file's descriptors, opened by name, and what was done through them.
python3 - "$log" <<'PY'
import re, sys
# Per phase (the case marks each with an access() of /cudaep-weight-reads-phase/NAME): the
# opens of weights.bin, the mappings made through those descriptors, and what read() got.
phase, order, stats, fds = "start", ["start"], {}, {}
def at(p):
    return stats.setdefault(p, {"opens": {}, "maps": [], "read": 0})
for line in open(sys.argv[1]):
    m = re.match(r"(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\w+)", line)
    if not m:
        continue
    _, call, args, ret = m.groups()
    if call == "access" and "/cudaep-weight-reads-phase/" in args:
        phase = args.split("/cudaep-weight-reads-phase/")[1].split('"')[0]
        if phase not in order:
            order.append(phase)
    elif call == "openat" and "weights.bin" in args and not ret.startswith("-"):
        # Go opens every file O_CLOEXEC (CudaEp's opens); ORT's own come without it.
        who = "O_CLOEXEC (CudaEp)" if "O_CLOEXEC" in args else "plain (ORT, or this case at start)"
        at(phase)["opens"][who] = at(phase)["opens"].get(who, 0) + 1
        fds[ret] = True
    elif call == "mmap":
        a = args.split(", ")
        if len(a) >= 6 and a[4] in fds:
            at(phase)["maps"].append((int(a[1]), a[2], a[3]))
    elif call in ("read", "pread64"):
        if args.split(", ")[0] in fds and not ret.startswith("-"):
            at(phase)["read"] += int(ret)
    elif call == "close":
        fds.pop(args.strip(), None)
print("strace of weights.bin, per phase (opens; mappings made through them; bytes read with read()/pread64()):")
for p in order:
    if p not in stats or p == "between":
        continue
    st = stats[p]
    kinds = {}
    for length, prot, flags in st["maps"]:
        key = f"{prot}, {flags}"
        n, total = kinds.get(key, (0, 0))
        kinds[key] = (n + 1, total + length)
    maps = "; ".join(f"{n} x {prot} ({total / 2**10:.0f} KiB)" for prot, (n, total) in kinds.items()) or "none"
    opens = ", ".join(f"{n} {who}" for who, n in st["opens"].items()) or "none"
    print(f"  {p:<30} opens: {opens}; mappings: {maps}; read(): {st['read']} bytes")
PY
exit $status
