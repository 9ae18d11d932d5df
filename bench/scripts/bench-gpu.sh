#!/usr/bin/env bash
# bench-gpu.sh: build and run cudaep's benchmark suite (bench/cudaep-bench and the C and PyTorch
# baselines under bench/baselines).
#
#   bench/scripts/bench-gpu.sh build   # here (has Go): the bench binary, libcudaep.so and the
#                                      # C ABI client into build/bench
#   bench/scripts/bench-gpu.sh run     # there (has the GPU, no Go): compile the raw C baselines
#                                      # against the CUDA toolkit, run everything, JSON to $OUT
#   bench/scripts/bench-gpu.sh local   # one machine with Go (make bench): build, compile the
#                                      # raw C baselines when a CUDA toolkit is present, run on
#                                      # -backend=auto (the simulated device without a GPU)
#
# Extra arguments after the mode go to cudaep-bench (e.g. -quick, -rows=replay). Every step
# runs under `timeout`, so a hang cannot eat the device budget. The table prints last.
set -u
cd "$(dirname "$0")/../.."
B=build/bench
CUDA=${CUDA_HOME:-/usr/local/cuda}
mode=${1:-}
shift || true

# build_go compiles the bench binary (no cgo: it loads the driver through purego).
build_go() {
	mkdir -p "$B"
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$B/cudaep-bench" ./bench/cudaep-bench || return 1
}

# build_capi builds libcudaep.so into build/bench (the Makefile's link flags, without touching
# the header copy the Makefile maintains) and links the C ABI client against it, with an rpath
# to its own folder so that the pair travels together. A failure only loses the C ABI rows.
build_capi() {
	if ! CGO_ENABLED=1 go build -buildmode=c-shared -trimpath \
		-ldflags="-s -w -extldflags=-Wl,--version-script=$(pwd)/capi/exports.map,-soname,libcudaep.so" \
		-o "$B/libcudaep.so" ./capi >"$B/capi-build.log" 2>&1; then
		echo "bench-gpu: libcudaep.so did not build; the C ABI rows will be missing (see $B/capi-build.log)"
		tail -5 "$B/capi-build.log"
		return 0
	fi
	rm -f "$B/libcudaep.h" # cgo's own header, not the public one
	if ! gcc -O2 -Wall -Wextra -Iinclude bench/baselines/capi_replay_bench.c -L"$B" -lcudaep -ldl \
		-Wl,-rpath,'$ORIGIN' -o "$B/capi_replay_bench" >>"$B/capi-build.log" 2>&1; then
		echo "bench-gpu: the C ABI client did not link (does libcudaep.so export the graph API yet?); the C ABI rows will be missing"
		grep -E 'error|undefined' "$B/capi-build.log" | head -5
		rm -f "$B/capi_replay_bench"
	fi
}

# build_raw compiles the raw C driver and cuBLAS baselines against the CUDA toolkit. The
# driver library is found where the machine's driver lives, or in the toolkit's stubs.
build_raw() {
	if [ ! -f "$CUDA/include/cuda.h" ]; then
		echo "bench-gpu: no $CUDA/include/cuda.h: the raw C baselines are not built"
		return 0
	fi
	local L="-L/usr/local/nvidia/lib64 -L/usr/lib/x86_64-linux-gnu -L$CUDA/lib64 -L$CUDA/lib64/stubs"
	gcc -O2 -Wall -Wextra -I"$CUDA/include" bench/baselines/raw_step_bench.c $L -lcuda \
		-o "$B/raw_step_bench" || echo "bench-gpu: raw_step_bench did not compile"
	gcc -O2 -Wall -Wextra -I"$CUDA/include" bench/baselines/raw_sgemm_bench.c $L -lcublas -lcuda -lm \
		-o "$B/raw_sgemm_bench" || echo "bench-gpu: raw_sgemm_bench did not compile"
	# The in-process raw C baselines (loaded by cudaep-bench and the C ABI client): no CUDA
	# header needed, it loads libcuda.so.1 itself.
	gcc -O2 -Wall -Wextra -shared -fPIC bench/baselines/raw_inproc.c -ldl \
		-o "$B/libcudaep_rawbench.so" || echo "bench-gpu: raw_inproc did not compile"
}

# run_bench runs the bench binary with its output to $1 (a folder), the table last.
run_bench() {
	local out=$1
	shift
	mkdir -p "$out"
	export LD_LIBRARY_PATH="$CUDA/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	timeout "${BENCH_TIMEOUT:-380}" "$B/cudaep-bench" -bin="$B" -json="$out/bench.json" "$@" \
		>"$out/table.txt" 2>"$out/bench.log"
	local rc=$?
	[ $rc -eq 124 ] && echo "bench-gpu: cudaep-bench timed out after ${BENCH_TIMEOUT:-380}s"
	echo "----- tail of the progress log ($out/bench.log) -----"
	tail -15 "$out/bench.log"
	echo "----- cudaep-bench exit status $rc -----"
	cat "$out/table.txt"
	return $rc
}

case "$mode" in
build)
	rm -rf "$B" && mkdir -p "$B"
	build_go || { echo "bench-gpu: go build failed"; exit 1; }
	build_capi
	ls -la "$B"
	;;
run)
	[ -x "$B/cudaep-bench" ] || { echo "bench-gpu: $B/cudaep-bench is missing: run 'bench/scripts/bench-gpu.sh build' first"; exit 1; }
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv 2>&1 | head -3
	build_raw
	python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
	run_bench "${OUT:-$B/results}" -backend=cuda "$@"
	;;
local)
	build_go || { echo "bench-gpu: go build failed"; exit 1; }
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
		build_raw
		build_capi
	fi
	run_bench "$B/results" -backend=auto "$@"
	;;
*)
	echo "usage: $0 build|run|local [cudaep-bench flags...]" >&2
	exit 2
	;;
esac
