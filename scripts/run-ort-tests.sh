#!/usr/bin/env bash
# run-ort-tests.sh - the `ort` layer of `make test`: CudaEp (the plugin execution provider in
# libcudaep.so) inside unmodified ONNX Runtime builds, driven by ctests/ort/ort_host.
#
#   1. tools: cmake, a C/C++ compiler, npm, nm (installed with apt-get when missing and root)
#   2. ONNX's node tests: Debian's libonnx-testdata (installed the same way when missing)
#   3. ORT: each of ORT_VERSIONS from npm into ORT_CACHE/<version> (scripts/fetch-ort.sh; cached,
#      and outside build/ so `make clean` keeps it)
#   4. the host and its models, built by CMake in BUILD_DIR; then ctest runs every ort_* test:
#      the cpu-only harness checks (label ort-cpu), then CudaEp's cases (label ort-ep). ctest runs
#      every selected test even when one fails; the layer fails if any did.
#
# ORT_MODE=cpu runs only the harness checks (no EP needed). Without CreateEpFactories in
# CUDAEP_LIBRARY the layer says so and fails after the harness checks.
#
# Environment (the Makefile sets them): CUDAEP_LIBRARY, CUDAEP_VERSION, ORT_VERSIONS, ORT_CACHE,
# ORT_NODE_TESTS, BUILD_DIR, ORT_MODE (ep or cpu).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${CUDAEP_LIBRARY:?set CUDAEP_LIBRARY}" "${CUDAEP_VERSION:?set CUDAEP_VERSION}"
ORT_VERSIONS=${ORT_VERSIONS:-1.30.0 1.24.3}
ORT_CACHE=${ORT_CACHE:-.cache/ort}
ORT_NODE_TESTS=${ORT_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}
BUILD_DIR=${BUILD_DIR:-build/ctest-ort}
ORT_MODE=${ORT_MODE:-ep}
# CudaEp lists the simulated device only when asked to, by CUDAEP_BACKEND when ORT registers the
# library (docs/ORT.md): these cases run on it unless the caller names a backend
# (scripts/ort-gpu-check.sh sets cuda).
export CUDAEP_BACKEND=${CUDAEP_BACKEND:-sim}
start=$SECONDS

tools=(cmake:cmake c++:g++ nm:binutils python3:python3)
for version in $ORT_VERSIONS; do # npm only when a version is not cached yet
	[ "$(cat "$ORT_CACHE/$version/VERSION" 2>/dev/null)" = "$version" ] || { tools+=(npm:npm); break; }
done
scripts/require-tools.sh "${tools[@]}"

if [ ! -d "$ORT_NODE_TESTS" ]; then
	if [ "$ORT_NODE_TESTS" = /usr/share/libonnx-testdata/data/node ] && [ "$(id -u)" -eq 0 ] &&
		command -v apt-get >/dev/null 2>&1; then
		echo "ort: installing libonnx-testdata (ONNX's node tests)"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq || true
		apt-get install -y -qq --no-install-recommends libonnx-testdata >/dev/null || true
	fi
	if [ ! -d "$ORT_NODE_TESTS" ]; then
		echo "error: ONNX's node tests are not in $ORT_NODE_TESTS: install libonnx-testdata" \
			"(apt-get install libonnx-testdata, needs root) or set ORT_NODE_TESTS." >&2
		exit 1
	fi
fi

libraries=""
for version in $ORT_VERSIONS; do
	scripts/fetch-ort.sh "$version" "$ORT_CACHE/$version"
	libraries+="${libraries:+;}$version=$(cd "$ORT_CACHE/$version" && pwd)/libonnxruntime.so.1"
done

cmake -S . -B "$BUILD_DIR" -DCUDAEP_LIBRARY="$CUDAEP_LIBRARY" -DCUDAEP_VERSION="$CUDAEP_VERSION" \
	-DCUDAEP_ORT_LIBRARIES="$libraries" -DCUDAEP_ORT_NODE_TESTS="$ORT_NODE_TESTS" >/dev/null
env -u MAKEFLAGS -u MAKELEVEL cmake --build "$BUILD_DIR" --target ort_host ort_models -j 2

# (Not `nm | grep -q`: with pipefail, grep quitting early makes nm's SIGPIPE fail the pipeline.)
symbols=$(nm -D "$CUDAEP_LIBRARY" 2>/dev/null || true)
has_ep=0
if grep -qw CreateEpFactories <<<"$symbols"; then
	has_ep=1
fi

status=0
echo "ort: the harness against ORT's CPU EP alone (label ort-cpu)"
ctest --test-dir "$BUILD_DIR" -L '^ort-cpu$' --output-on-failure || status=1
if [ "$ORT_MODE" = cpu ]; then
	echo "ort: ORT_MODE=cpu: CudaEp's cases not run"
elif [ $has_ep = 0 ]; then
	echo "ort: FAIL: $CUDAEP_LIBRARY exports no CreateEpFactories, so it is not an ORT plugin EP" \
		"library yet (the ORT adapter, capi/ort, is not built into it). CudaEp's cases cannot run;" \
		"\`make test-ort ORT_MODE=cpu\` runs the harness checks alone." >&2
	status=1
else
	echo "ort: CudaEp inside ORT $ORT_VERSIONS (label ort-ep)"
	ctest --test-dir "$BUILD_DIR" -L '^ort-ep$' --output-on-failure || status=1
fi
echo "ort: $((SECONDS - start)) s"
exit $status
