#!/usr/bin/env bash
# ort-gpu-check.sh: CudaEp inside ONNX Runtime on a GPU machine, through the C host of
# ctests/ort with backend=cuda (scripts/gpu-check.sh runs the Python host; both do not fit in
# one carry: ORT alone is 44 MiB).
#
#   scripts/ort-gpu-check.sh build   # here: make test-ort's host, models and ORT 1.30.0, the
#                                    # library (make ctest-build) and ONNX's node tests (packed)
#                                    # into build/ort-gpu
#   scripts/ort-gpu-check.sh run     # there: every host case, one line per case last
#
# Carry .cache/ort/1.30.0, build/ctests, build/ctest-ort/ctests/ort and build/ort-gpu (and
# build/wheel for the installed wheel's check).
set -u
cd "$(dirname "$0")/.."
H=build/ctest-ort/ctests/ort/ort_host
M=build/ctest-ort/ctests/ort/models

case "${1:-}" in
build)
	make --no-print-directory test-ort >/dev/null && make --no-print-directory ctest-build >/dev/null || exit 1
	# Every ONNX node test (27 MiB, 4 MiB packed): the host runs those of the ops cudaep claims.
	rm -rf build/ort-gpu && mkdir -p build/ort-gpu
	tar czf build/ort-gpu/node.tgz -C /usr/share/libonnx-testdata/data node
	du -sh .cache/ort/1.30.0 build/ctests build/ctest-ort/ctests/ort build/ort-gpu
	;;
run)
	export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export CUDAEP_TEST_BACKEND=cuda CUDAEP_BACKEND=cuda CUDAEP_ORT_LIBRARY=$PWD/.cache/ort/1.30.0/libonnxruntime.so.1
	export CUDAEP_LIBRARY=$PWD/build/ctests/libcudaep.so
	rm -rf build/ort-gpu/node && tar xzf build/ort-gpu/node.tgz -C build/ort-gpu
	summary=()
	for c in devices "node_tests build/ort-gpu/node" "node_tests $M/node_extra" "mlp $M" "split $M" "graph $M" "misuse $M" \
		"iobinding $M" "paging $M" "decoder $M" "nbits $M" "weight_reads $M" "exported ctests/ort/testdata/llama_export"; do
		echo "=== $c"
		# shellcheck disable=SC2086
		timeout 120 "$H" $c 2>&1 | tee /tmp/ort-case.log | grep -E "passed,|^  [A-Z][a-zA-Z]+ +[0-9]+/[0-9]+|FAIL"
		summary+=("$(grep -h '^RESULT' /tmp/ort-case.log || echo "RESULT $c: no result (crash or timeout)")")
	done
	# Every node test with the per-test list, for docs/ONNX_NODE_TESTS.md (make ort-node-table
	# ORT_NODE_GPU_LOG=<this log>).
	echo "=== node_tests --all-ops (list)"
	CUDAEP_ORT_NODE_LIST=1 timeout 300 "$H" node_tests --all-ops build/ort-gpu/node >"${OUT:-/tmp}/node-tests.log" 2>&1
	tail -2 "${OUT:-/tmp}/node-tests.log"
	summary+=("$(grep -h '^RESULT' "${OUT:-/tmp}/node-tests.log" | sed 's/node_tests/node_tests --all-ops/' || echo "RESULT node_tests --all-ops: no result")")
	# The wheel as a user installs it, into the machine's Python (which has onnxruntime): carry
	# build/wheel (make wheel) for this step.
	for whl in build/wheel/onnxruntime_ep_cudaep-*.whl; do
		[ -f "$whl" ] || continue
		echo "=== wheel $(basename "$whl")"
		rm -rf /tmp/cudaep-wheel
		if python3 -m pip install -q --no-index --no-deps --target /tmp/cudaep-wheel "$whl" &&
			(cd /tmp && PYTHONPATH=/tmp/cudaep-wheel timeout 300 python3 "$OLDPWD/scripts/wheel_ort_check.py") >/tmp/wheel.log 2>&1; then
			summary+=("RESULT wheel: PASS ($(grep -oE '[0-9]+ passed, [0-9]+ failed' /tmp/wheel.log | tail -1))")
		else
			summary+=("RESULT wheel: FAIL ($(grep -oE '[0-9]+ passed, [0-9]+ failed' /tmp/wheel.log | tail -1))")
		fi
		grep -E "passed,|FAIL" /tmp/wheel.log | tail -12
	done
	echo "===== ort-gpu-check summary ====="
	printf '%s\n' "${summary[@]}"
	! printf '%s\n' "${summary[@]}" | grep -vqE ': PASS( \(.*\))?$'
	;;
*) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
