#!/usr/bin/env bash
# gpu-check.sh: run every GPU suite of cudaep in one call on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh build   # here (has Go): Go test binaries and the demo into build/gpu,
#                                # the C tests and example into build/ctests (make ctest-build),
#                                # the benchmark into build/bench (bench/scripts/bench-gpu.sh
#                                # build)
#   scripts/gpu-check.sh run     # there (has the GPU, no Go): run them all, summary last
#
# Carry build/gpu, build/ctests and build/bench. SKIP_BENCH=1 skips the benchmark tables.
#
# The device machine has no Go toolchain: everything Go is compiled by "build" and carried in
# build/gpu. Each step runs under `timeout` so a hang cannot eat the device budget. Logs go to
# $OUT (or build/gpu/logs) and the last lines printed are a one-line-per-step summary.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=build/gpu

# Packages whose Go tests run on the GPU, as name:import-path.
PKGS="cudadrv:./cudadrv cuda:./cudadrv/cuda graphs:./graphs paging:./paging kernels:./ep/kernels ep:./ep partition:./partition"

build() {
	rm -rf "$B" && mkdir -p "$B"
	for p in $PKGS; do
		name=${p%%:*} path=${p#*:}
		[ -d "$path" ] || continue
		CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$B/$name.test" "$path" || echo "build $name: FAILED (not carried)"
	done
	make --no-print-directory ctest-build >/dev/null || echo "build C tests: FAILED (not carried)"
	bench/scripts/bench-gpu.sh build >/dev/null || echo "build benchmark: FAILED (not carried)"
	if [ -d cmd/cudaep-demo ]; then
		CGO_ENABLED=0 go build -ldflags="-s -w" -o "$B/cudaep-demo" ./cmd/cudaep-demo
	fi
	if [ -d bench/cudaep-bench ]; then
		CGO_ENABLED=0 go build -o "$B/cudaep-bench" ./bench/cudaep-bench
	fi
	ls -la "$B"
}

run() {
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export CUDAEP_TEST_BACKEND=cuda
	logs=$B/logs
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
		# A step that is no Go test counts what it says itself, in its last "N passed, N failed"
		# line (ctest's closing line, and unittest's "Ran N tests", are read too).
		if [ "$counts" = "0 passed, 0 failed, 0 skipped" ]; then
			local own
			own=$(grep -oE '[0-9]+ passed, [0-9]+ failed' "$logs/$name.log" | tail -1)
			if [ -z "$own" ]; then # ctest: "100% tests passed out of M" or "..., F tests failed out of M"
				own=$(grep -oE 'tests passed(, [0-9]+ tests failed)? out of [0-9]+' "$logs/$name.log" | tail -1 |
					awk '{m=$NF; f=($3 ~ /^[0-9]+$/) ? $3 : 0; print m-f " passed, " f " failed"}')
			fi
			if [ -z "$own" ] && grep -qE '^Ran [0-9]+ tests?' "$logs/$name.log"; then # Python's unittest
				local ran bad
				ran=$(grep -oE '^Ran [0-9]+' "$logs/$name.log" | tail -1 | awk '{print $2}')
				bad=$(grep -oE '(failures|errors)=[0-9]+' "$logs/$name.log" | awk -F= '{n+=$2} END {print n+0}')
				own="$((ran - bad)) passed, $bad failed"
			fi
			counts=${own:-"no count (the step printed none)"}
		fi
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
	if [ -d build/ctests ]; then
		step ctest 300 . ctest --test-dir build/ctests --output-on-failure
		step mlp-server 120 . build/ctests/mlp_server --tokens 64 --prompt 32
		# memcheck and racecheck must report 0 errors on the C tests that capture and replay.
		step sanitize-memcheck 300 . scripts/sanitize-ctests.sh memcheck build/ctests
		step sanitize-racecheck 300 . scripts/sanitize-ctests.sh racecheck build/ctests
		tables+=("== compute-sanitizer" "$(grep -h 'ERROR SUMMARY\|missing' "$logs"/sanitize-*.log)")
		step python 300 . env CUDAEP_LIBRARY="$ROOT/build/ctests/libcudaep.so" PYTHONPATH=python \
			python3 -m unittest discover -s python/tests -t python -v
		tables+=("== mlp_server (C++ example)" "$(tail -12 "$logs/mlp-server.log")")
		# cudaep inside ONNX Runtime from Python, as users run it (needs onnxruntime and onnx).
		ortpy=${ORT_PYTHON:-$(command -v python3)}
		if [ -x "$ortpy" ] && "$ortpy" -c 'import onnxruntime, onnx' 2>/dev/null; then
			step ort-python 240 . "$ortpy" scripts/ort_python_check.py build/ctests/libcudaep.so
			tables+=("== ONNX Runtime (Python) with CudaEp" "$(tail -8 "$logs/ort-python.log")")
		fi
	fi
	if [ -z "${SKIP_BENCH:-}" ] && [ -x build/bench/cudaep-bench ]; then
		step cudaep-bench 420 . bench/scripts/bench-gpu.sh run
		tables+=("== cudaep-bench" "$(grep -E 'goals|met|MISSED' "$logs/cudaep-bench.log" | tail -30)")
	fi
	if [ -x "$B/cudaep-demo" ]; then
		step demo 120 . "$B/cudaep-demo" -backend=auto
		step demo-large 240 . "$B/cudaep-demo" -backend=cuda -layers=8 -width=2048 -prefill=128 -tokens=64
		tables+=("== demo" "$(tail -12 "$logs/demo.log")" "== demo-large" "$(tail -11 "$logs/demo-large.log")")
	fi
	# Only 8 files come back from the device tool's $OUT: the benchmark's JSON (written there by
	# bench-gpu.sh) and the logs a reader needs most.
	if [ -n "${OUT:-}" ]; then
		for f in ctest python mlp-server demo-large go-ep go-partition ort-python; do
			[ -f "$logs/$f.log" ] && cp "$logs/$f.log" "$OUT/"
		done
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
