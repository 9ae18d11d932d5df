#!/usr/bin/env bash
# op-bench.sh: the op benchmark of package ep/kernels (TestOpBenchTable: memory-bound ops on
# 256 MiB tensors and float16/bfloat16 MatMul against cublasGemmEx) with PyTorch beside it
# (bench/baselines/torch_ops.py), measured in one job on one GPU.
#
#   bench/scripts/op-bench.sh build       # here (has Go): build/opbench/kernels.test (no cgo)
#   bench/scripts/op-bench.sh run [OUT]   # there (has the GPU, no Go): PyTorch first, then the
#                                         # test binary; OUT (default $OUT, else
#                                         # build/opbench/results) gets torch.json, ops.json
#                                         # and table.txt
#
# PYTHON picks the interpreter that has PyTorch (default: /opt/torch/.venv/bin/python when it
# exists, else python3); CUDAEP_KERNELS_PTX_DIR, when set, is passed on to the test binary
# (load PTX from DIR/ptx instead of the embedded files). Every step runs under `timeout`.
set -u
cd "$(dirname "$0")/../.."
B=build/opbench
CUDA=${CUDA_HOME:-/usr/local/cuda}
mode=${1:-}

case "$mode" in
build)
	mkdir -p "$B"
	CGO_ENABLED=0 go test -c -o "$B/kernels.test" ./ep/kernels || exit 1
	ls -la "$B/kernels.test"
	;;
run)
	out=${2:-${OUT:-$B/results}}
	mkdir -p "$out"
	[ -x "$B/kernels.test" ] || { echo "op-bench: $B/kernels.test is missing: run 'bench/scripts/op-bench.sh build' first"; exit 1; }
	py=${PYTHON:-}
	if [ -z "$py" ]; then
		py=python3
		[ -x /opt/torch/.venv/bin/python ] && py=/opt/torch/.venv/bin/python
	fi
	timeout 240 "$py" bench/baselines/torch_ops.py >"$out/torch.json" 2>"$out/torch.log" ||
		echo "op-bench: torch_ops.py failed (exit $?); the table has no PyTorch column"
	export LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	bin=$(pwd)/$B/kernels.test
	(cd ep/kernels && CUDAEP_TEST_BACKEND=cuda CUDAEP_OPBENCH=1 CUDAEP_OPBENCH_JSON="$out/ops.json" \
		CUDAEP_OPBENCH_TORCH="$out/torch.json" timeout 300 "$bin" -test.run '^TestOpBenchTable$' -test.v) >"$out/table.txt" 2>&1
	rc=$?
	cat "$out/table.txt"
	exit $rc
	;;
*)
	echo "usage: $0 build|run [OUT]" >&2
	exit 2
	;;
esac
