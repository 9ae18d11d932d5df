#!/usr/bin/env bash
# sanitize-ctests.sh TOOL DIR: run the C tests that capture, replay, reset and drive the capture
# window from several threads under compute-sanitizer's TOOL (memcheck, racecheck) in DIR (a
# `make ctest-build` folder), print each test's ERROR SUMMARY, and fail if any reports an
# error. Used by scripts/gpu-check.sh on the GPU machine.
set -u
tool=$1 dir=$2
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
rc=0
cd "$dir" || exit 2
for t in graphs wrong_state reset_race kernels buffers; do
	[ -x "./$t" ] || { echo "$t: missing"; rc=1; continue; }
	if ! "$cs" --tool "$tool" --error-exitcode 9 --print-limit 20 "./$t" >"sanitize-$tool-$t.log" 2>&1; then
		rc=1
		tail -25 "sanitize-$tool-$t.log"
	fi
	echo "$t: $(grep -h 'ERROR SUMMARY' "sanitize-$tool-$t.log" | tail -1)"
done
exit $rc
