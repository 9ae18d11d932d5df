#!/usr/bin/env bash
# prefill-gpu.sh: measure the demo's paged prefill on a GPU machine in one short call.
#
#   bench/scripts/prefill-gpu.sh build   # here (has Go): the demo and its test binary into
#                                        # build/prefill15
#   bench/scripts/prefill-gpu.sh run     # there (has the GPU, no Go): carry build/prefill15
#
# run: the demo at 8 layers x 16 MiB and 16 layers x 64 MiB, then TestPrefillDiagnostics
# (cmd/cudaep-demo/prefill_diag_test.go: the prefill loop with its kernels taken apart) at both
# sizes and once with wait_mode=block. Every step runs under `timeout`; logs go to $OUT (or
# build/prefill15/logs), at most 6 files; the whole run stays under 4 minutes.
set -u
cd "$(dirname "$0")/../.."
B=build/prefill15

build() {
	rm -rf "$B" && mkdir -p "$B"
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$B/cudaep-demo" ./cmd/cudaep-demo || exit 1
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$B/cudaep-demo.test" ./cmd/cudaep-demo || exit 1
	ls -la "$B"
}

run() {
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	logs=${OUT:-$B/logs}
	mkdir -p "$logs"
	data=$(mktemp -d)
	summary=$logs/summary.log
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$summary" 2>&1
	step() { # step NAME SECONDS CMD...
		local name=$1 secs=$2 t0 rc
		shift 2
		t0=$(date +%s)
		timeout "$secs" "$@" >"$logs/$name.log" 2>&1
		rc=$?
		echo "$name: rc=$rc, $(($(date +%s) - t0))s" >>"$summary"
	}
	demo() { # demo NAME LAYERS WIDTH
		step "$1" 75 "$B/cudaep-demo" -backend=cuda -layers="$2" -width="$3" -prefill=128 -tokens=8 -data="$data"
	}
	diag() { # diag NAME LAYERS WIDTH [OPTIONS]
		step "$1" 45 env CUDAEP_PREFILL_DIAG=1 CUDAEP_PREFILL_LAYERS="$2" CUDAEP_PREFILL_WIDTH="$3" \
			CUDAEP_PREFILL_DATA="$data" CUDAEP_PREFILL_OPTIONS="${4:-}" \
			"$B/cudaep-demo.test" -test.run '^TestPrefillDiagnostics$' -test.count=1 -test.v
	}
	demo demo-8x16 8 2048   # 8 layers of 16 MiB (128 MiB file)
	demo demo-16x64 16 4096 # 16 layers of 64 MiB (1 GiB file)
	diag diag-8x16 8 2048
	diag diag-16x64 16 4096
	diag diag-8x16-block 8 2048 wait_mode=block
	rm -rf "$data"
	for f in demo-8x16 demo-16x64; do
		echo "== $f" >>"$summary"
		grep -E 'prefill|raw pinned|external data' "$logs/$f.log" >>"$summary"
	done
	for f in diag-8x16 diag-16x64 diag-8x16-block; do
		echo "== $f" >>"$summary"
		sed -n '/^prefill diagnostics/,/^perfect overlap/p' "$logs/$f.log" | head -14 >>"$summary"
	done
	cat "$summary"
}

case "${1:-}" in
build) build ;;
run) run ;;
*)
	echo "usage: $0 build|run" >&2
	exit 2
	;;
esac
