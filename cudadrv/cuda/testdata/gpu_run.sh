#!/bin/sh
# gpu_run.sh runs package cudadrv/cuda's GPU tests and benchmarks on a machine with a CUDA device
# and no Go toolchain, next to the raw C baseline, and prints a side-by-side table.
#
# Build the test binary first, on a machine with Go, from the repository root:
#   mkdir -p build/gpu && CGO_ENABLED=0 go test -c -o build/gpu/cuda.test ./cudadrv/cuda
# then, on the GPU machine, from the repository root:
#   sh cudadrv/cuda/testdata/gpu_run.sh build/gpu
#
# The tests run twice: first in the environment as found (so cuBLAS and NVRTC are found through
# the package's own search when the toolkit is not on the loader path), then the benchmarks with
# the toolkit's lib64 on LD_LIBRARY_PATH.
set -u
dir=$(cd "${1:-build/gpu}" && pwd) || exit 1
out=${OUT:-$dir}
cuda=${CUDA_HOME:-/usr/local/cuda}

echo "== environment"
nvidia-smi -L 2>&1 | head -4
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
ls "$cuda/lib64" 2>/dev/null | grep -E '^lib(cublas|cublasLt|nvrtc|nvrtc-builtins)\.so\.[0-9]+' | head -8
ldconfig -p 2>/dev/null | grep -E 'lib(cuda|cublas|nvrtc)\.so' | head -6

echo "== build the C baseline"
gcc -O2 -Wall -I"$cuda/include" bench/baselines/raw_driver_bench.c \
	-L/usr/local/nvidia/lib64 -L/usr/lib/x86_64-linux-gnu -L"$cuda/lib64/stubs" -lcuda \
	-o "$dir/raw_driver_bench" || exit 1

echo "== tests, environment as found"
# Tests read files relative to the package directory, as go test runs them.
cd cudadrv/cuda || exit 1
# The toolkit-directory test first, in a process of its own (nothing loaded yet by soname).
CUDAEP_TEST_BACKEND=cuda "$dir/cuda.test" -test.v -test.run 'TestGPULibrariesLoadFromTheToolkitDirectory' \
	-test.timeout 60s 2>&1 | grep -v -E '^=== (RUN|PAUSE|CONT)'
CUDAEP_TEST_BACKEND=cuda "$dir/cuda.test" -test.v -test.count 1 -test.timeout 150s >"$out/tests.log" 2>&1
echo "exit status $?"
grep -v -E '^=== (RUN|PAUSE|CONT)' "$out/tests.log"

export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== benchmarks"
"$dir/cuda.test" -test.run '^$' -test.bench CallingMethods -test.benchtime 200000x 2>&1 | grep -E '^Benchmark'
# Rounds alternate C and Go so that drift on the machine affects both alike.
: >"$out/go_bench.txt"
: >"$out/raw_bench.txt"
for round in 1 2 3 4; do
	"$dir/raw_driver_bench" 20000 >>"$out/raw_bench.txt" || exit 1
	CUDAEP_TEST_BACKEND=cuda "$dir/cuda.test" -test.run '^$' -test.benchtime 20000x -test.count 3 -test.timeout 90s \
		-test.bench '^Benchmark(LaunchKernel|MemcpyHtoDAsync|EventRecord|GraphLaunch)$' >>"$out/go_bench.txt" 2>&1
done
grep -E '^(FAIL|---)' "$out/go_bench.txt"

echo "== per call: median of 12 Go runs vs median of 4 C runs (each the median of 7 repetitions)"
awk '
	function median(a, key, m,    i, j, t) {
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[key, j] < a[key, i]) { t = a[key, i]; a[key, i] = a[key, j]; a[key, j] = t }
		return m % 2 ? a[key, (m + 1) / 2] : (a[key, m / 2] + a[key, m / 2 + 1]) / 2
	}
	FNR == NR { rn[$2]++; raw[$2, rn[$2]] = $3; next }
	/^Benchmark(LaunchKernel|MemcpyHtoDAsync|EventRecord|GraphLaunch)-/ {
		name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
		n[name]++; v[name, n[name]] = $3; allocs[name] = $(NF-1)
	}
	END {
		printf "%-16s %10s %10s %7s %10s\n", "call", "Go ns", "C ns", "Go/C", "allocs/op"
		split("LaunchKernel MemcpyHtoDAsync EventRecord GraphLaunch", order, " ")
		for (k = 1; k <= 4; k++) {
			name = order[k]; m = n[name]
			if (m == 0) { printf "%-16s (no Go result)\n", name; continue }
			med = median(v, name, m); rmed = median(raw, name, rn[name])
			printf "%-16s %10.1f %10.1f %7.2f %10s\n", name, med, rmed, med / rmed, allocs[name]
		}
	}' "$out/raw_bench.txt" "$out/go_bench.txt"
