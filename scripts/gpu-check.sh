#!/usr/bin/env bash
# gpu-check.sh: run every GPU suite of cudaep in one call on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh build   # here (has Go): build test binaries, library, C tests into build/gpu
#   scripts/gpu-check.sh run     # there (has the GPU, no Go): run them all, summary last
#
# The device machine has no Go toolchain: everything Go is compiled by "build" and carried in
# build/gpu. Each step runs under `timeout` so a hang cannot eat the device budget. Logs go to
# $OUT (or build/gpu/logs) and the last lines printed are a one-line-per-step summary.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=build/gpu

# Packages whose Go tests run on the GPU, as name:import-path.
PKGS="cudadrv:./cudadrv cuda:./cudadrv/cuda graphs:./graphs paging:./paging kernels:./ep/kernels ep:./ep"

build() {
	rm -rf "$B" && mkdir -p "$B"
	for p in $PKGS; do
		name=${p%%:*} path=${p#*:}
		[ -d "$path" ] || continue
		CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$B/$name.test" "$path" || echo "build $name: FAILED (not carried)"
	done
	if [ -f Makefile ]; then
		make --no-print-directory >/dev/null && cp -r build/libcudaep.so build/include "$B"/ || echo "build library: FAILED (not carried)"
	fi
	if [ -d cmd/cudaep-demo ]; then
		CGO_ENABLED=0 go build -ldflags="-s -w" -o "$B/cudaep-demo" ./cmd/cudaep-demo
	fi
	if [ -d cmd/cudaep-bench ]; then
		CGO_ENABLED=0 go build -o "$B/cudaep-bench" ./cmd/cudaep-bench
	fi
	ls -la "$B"
}

run() {
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export CUDAEP_TEST_BACKEND=cuda
	logs=${OUT:-$B/logs}
	mkdir -p "$logs"
	summary=()
	tables=()
	step() { # step NAME SECONDS DIR CMD...
		local name=$1 secs=$2 dir=$3
		shift 3
		local t0 rc
		t0=$(date +%s)
		(cd "$dir" && timeout "$secs" "$@") >"$logs/$name.log" 2>&1
		rc=$?
		local took=$(($(date +%s) - t0)) verdict=ok
		[ $rc -eq 0 ] || verdict="FAIL rc=$rc"
		[ $rc -eq 124 ] && verdict="TIMEOUT after ${secs}s"
		local counts fails
		counts="$(grep -cE -- '--- PASS' "$logs/$name.log") passed, $(grep -cE -- '--- FAIL' "$logs/$name.log") failed, $(grep -cE -- '--- SKIP' "$logs/$name.log") skipped"
		fails=$(grep -E -- '--- FAIL' "$logs/$name.log" | sed 's/^ *//' | head -4 | tr '\n' ' ')
		summary+=("$(printf '%-18s %-16s %4ss  %s  %s' "$name" "$verdict" "$took" "$counts" "$fails")")
		if [ $rc -ne 0 ]; then
			echo "----- tail of $name -----"
			grep -vE '^(=== RUN|--- PASS|    --- PASS)' "$logs/$name.log" | tail -30
		fi
	}
	# bench NAME SECONDS DIR CMD...: like step, and keeps the printed table for the end.
	bench() {
		local name=$1
		CUDAEP_BENCH=1 step "$@"
		tables+=("== $name" "$(grep -vE '^(=== |--- |PASS|ok |FAIL$|goos|goarch|pkg|cpu)' "$logs/$name.log" | sed 's/^    [a-z_]*_test.go:[0-9]*: //' | tail -24)")
	}
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	T=${GO_TEST_TIMEOUT:-240}
	for p in $PKGS; do
		name=${p%%:*} path=${p#*:}
		[ -x "$B/$name.test" ] || continue
		step "go-$name" "$T" "$path" "$ROOT/$B/$name.test" -test.count=1 -test.v ${GO_TEST_RUN:+-test.run "$GO_TEST_RUN"}
	done
	if [ -z "${SKIP_BENCH:-}" ]; then
		[ -x "$B/cuda.test" ] && bench cuda-bench 300 . sh cudadrv/cuda/testdata/gpu_run.sh "$B"
		[ -x "$B/graphs.test" ] && bench graphs-bench 240 graphs "$ROOT/$B/graphs.test" -test.run 'TestBench' -test.v
		[ -x "$B/kernels.test" ] && bench kernels-bench 180 ep/kernels "$ROOT/$B/kernels.test" -test.run 'TestBench' -test.v
		[ -x "$B/paging.test" ] && bench paging-bench 300 paging "$ROOT/$B/paging.test" -test.run 'TestBench' -test.v
	fi
	if [ -x "$B/cudaep-demo" ]; then
		step demo 120 . "$B/cudaep-demo" -backend=auto
		step demo-large 240 . "$B/cudaep-demo" -backend=cuda -layers=8 -width=2048 -prefill=128 -tokens=64
		tables+=("== demo" "$(tail -12 "$logs/demo.log")" "== demo-large" "$(tail -11 "$logs/demo-large.log")")
	fi
	echo
	for t in "${tables[@]}"; do echo "$t"; done
	echo
	echo "===== gpu-check summary ($(date -u +%FT%TZ)) ====="
	for s in "${summary[@]}"; do echo "$s"; done
}

case "${1:-}" in
build) build ;;
run) run ;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
