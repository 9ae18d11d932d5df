#!/usr/bin/env bash
# op-variants-gpu.sh: measure the kernels of package ep/kernels beside their baselines
# (variants.go) on a GPU machine, from CUDA sources newer than the committed PTX, in one job:
#
#   bench/scripts/op-variants-gpu.sh build    # here (has Go): build/opvariants/kernels.test.xz
#   bench/scripts/op-variants-gpu.sh [run]    # there (nvcc, the GPU, no Go); results in $OUT
#
# run: (1) ep/kernels/mkptx.sh compiles the sources into a fresh folder; (2) the package's
# tests run on the GPU (CUDAEP_TEST_BACKEND=cuda) with that PTX (CUDAEP_KERNELS_PTX_DIR), every
# kernel's correctness tests included; (3) TestOpBenchTable runs with the baseline rows
# (CUDAEP_OPBENCH_VARIANTS=1: LayerNormalization's "old" and Transpose's "nd" beside the
# kernels the rules pick, each default's output checked against its baseline's on the same
# 256 MiB tensors); with TORCH=1, bench/baselines/torch_ops.py first for the PyTorch column. OUT
# (default build/opvariants/results) gets ptx.tar.gz (the new ep/kernels/ptx/*.ptx, to commit),
# mkptx.txt, tests.txt, table.txt and ops.json (and torch.log with TORCH=1). Every step runs
# under `timeout`, 330 s in all, so the whole job takes under 6 minutes.
set -u
cd "$(dirname "$0")/../.."
B=build/opvariants
CUDA=${CUDA_HOME:-/usr/local/cuda}

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
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/kernels.test
if [ -f "$B/kernels.test.xz" ]; then
	xz -dc "$B/kernels.test.xz" >"$bin" || { echo "op-variants: cannot unpack $B/kernels.test.xz"; exit 1; }
elif [ -f "$B/kernels.test" ]; then
	cp "$B/kernels.test" "$bin"
else
	echo "op-variants: $B/kernels.test(.xz) is missing: run 'bench/scripts/op-variants-gpu.sh build' first"
	exit 1
fi
chmod +x "$bin"
export PATH="$CUDA/bin:$PATH" LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0

echo "== 1. mkptx"
timeout 80 ep/kernels/mkptx.sh "$work/ptx" >"$out/mkptx.txt" 2>&1
r=$?
cat "$out/mkptx.txt"
if [ $r -ne 0 ]; then
	echo "op-variants: mkptx.sh failed (exit $r)"
	exit 1
fi
tar -C "$work" -czf "$out/ptx.tar.gz" ptx

if [ "${TORCH:-0}" = 1 ]; then
	echo "== torch_ops.py"
	py=${PYTHON:-python3}
	[ -z "${PYTHON:-}" ] && [ -x /opt/torch/.venv/bin/python ] && py=/opt/torch/.venv/bin/python
	timeout 70 "$py" bench/baselines/torch_ops.py >"$work/torch.json" 2>"$out/torch.log" || echo "op-variants: torch_ops.py failed (exit $?)"
	head -c 300 "$work/torch.json"; echo
fi

echo "== 2. ep/kernels tests on the GPU"
(cd ep/kernels && CUDAEP_TEST_BACKEND=cuda CUDAEP_KERNELS_PTX_DIR="$work" timeout 90 "$bin" -test.timeout 85s -test.v) >"$out/tests.txt" 2>&1
r=$?
grep -E '^(--- FAIL|FAIL|PASS|ok|panic)' "$out/tests.txt" | head -40
echo "tests: exit $r ($(grep -c '^--- PASS' "$out/tests.txt") top-level passed, $(grep -c -- '--- FAIL' "$out/tests.txt") failures)"
[ $r -ne 0 ] && rc=$r

echo "== 3. op benchmark with the baseline rows"
(cd ep/kernels && CUDAEP_TEST_BACKEND=cuda CUDAEP_KERNELS_PTX_DIR="$work" CUDAEP_OPBENCH=1 CUDAEP_OPBENCH_VARIANTS=1 \
	CUDAEP_OPBENCH_JSON="$out/ops.json" CUDAEP_OPBENCH_TORCH="$work/torch.json" \
	timeout 90 "$bin" -test.run '^TestOpBenchTable$' -test.timeout 85s) >"$out/table.txt" 2>&1
r=$?
grep -v '^ ' "$out/table.txt"
[ $r -ne 0 ] && rc=$r
exit $rc
