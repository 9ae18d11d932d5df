#!/usr/bin/env bash
# op-variants2-gpu.sh: the lean variant measurement of issue 14's last misses, in one job of
# under 120 seconds on a GPU machine: the same-shape elementwise kernels (Add, Sigmoid; float32,
# float16) beside their "flat" and "v4" variants, and the float16 [8192,16384] Transpose beside
# its swizzled tile orders (ep/kernels/variants.go), with PyTorch's Add and Sigmoid on the same
# shapes. Only cuda/elementwise.cu and cuda/datamove.cu are compiled; the other modules come
# from the committed ep/kernels/ptx. The correctness suite does not run: each variant row checks
# its output bit for bit against the default kernel's (Transpose: against "nd"), and a
# mismatch fails the benchmark.
#
#   scripts/op-variants2-gpu.sh build   # here (has Go): build/opvariants2/kernels.test.xz
#   scripts/op-variants2-gpu.sh [run]   # there (nvcc, the GPU, Python with torch; no Go)
#
# run writes to $OUT (default build/opvariants2/results) four files: table.txt (the table),
# ops.json (every sample), ptx.tar.gz (the new elementwise.ptx and datamove.ptx) and log.txt
# (nvcc's and PyTorch's output, the steps' exit codes and times). Every step runs under
# `timeout`; the benchmark gets what is left of 112 seconds.
set -u
cd "$(dirname "$0")/.."
B=build/opvariants2
CUDA=${CUDA_HOME:-/usr/local/cuda}
ROWS=${CUDAEP_OPBENCH_ROWS:-'^(add|sigmoid)/|^transpose/float16($|/)'}

if [ "${1:-run}" = build ]; then
	mkdir -p "$B"
	CGO_ENABLED=0 go test -c -o "$B/kernels.test" ./ep/kernels || exit 1
	rm -f "$B/kernels.test.xz"
	xz -T2 -6 "$B/kernels.test" || exit 1
	ls -la "$B"
	exit 0
fi

out=${OUT:-$B/results}
mkdir -p "$out"
log=$out/log.txt
: >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say() { echo "[$SECONDS s] $*" | tee -a "$log"; }

bin=$work/kernels.test
timeout 20 xz -dc "$B/kernels.test.xz" >"$bin" || { say "cannot unpack $B/kernels.test.xz (run 'scripts/op-variants2-gpu.sh build')"; exit 1; }
chmod +x "$bin"
export PATH="$CUDA/bin:$PATH" LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDAEP_OPBENCH_ROWS="$ROWS"

# 1. nvcc on the two sources, in the background, into a copy of the committed PTX.
mkdir -p "$work/ptx"
cp ep/kernels/ptx/*.ptx "$work/ptx/"
timeout 60 ep/kernels/mkptx.sh "$work/ptx" elementwise datamove >"$work/mkptx.log" 2>&1 &
mkptx=$!
say "mkptx started (elementwise, datamove); rows: $ROWS"

# 2. PyTorch's rows meanwhile (the GPU is idle otherwise; nvcc runs on the CPU).
py=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$py" ] || py=python3
timeout 45 "$py" ctests/bench/torch_ops.py >"$work/torch.json" 2>"$work/torch.log"
say "torch_ops.py: exit $? ($(head -c 200 "$work/torch.json"))"
tail -n 5 "$work/torch.log" >>"$log"

wait "$mkptx"
r=$?
cat "$work/mkptx.log" >>"$log"
say "mkptx: exit $r"
if [ $r -ne 0 ]; then
	tail -n 30 "$work/mkptx.log"
	exit 1
fi
tar -C "$work/ptx" -czf "$out/ptx.tar.gz" elementwise.ptx datamove.ptx

# 3. The benchmark rows with their variants.
left=$((112 - SECONDS))
if [ $left -lt 15 ]; then
	say "no time left for the benchmark"
	exit 1
fi
(cd ep/kernels && CUDAEP_TEST_BACKEND=${CUDAEP_TEST_BACKEND:-cuda} CUDAEP_KERNELS_PTX_DIR="$work" CUDAEP_OPBENCH=1 CUDAEP_OPBENCH_VARIANTS=1 \
	CUDAEP_OPBENCH_JSON="$out/ops.json" CUDAEP_OPBENCH_TORCH="$work/torch.json" \
	timeout "$left" "$bin" -test.run '^TestOpBenchTable$' -test.timeout "$((left - 2))s") >"$out/table.txt" 2>&1
r=$?
say "benchmark: exit $r (limit $left s)"
grep -v '^ ' "$out/table.txt"
exit $r
