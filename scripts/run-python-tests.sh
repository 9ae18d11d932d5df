#!/usr/bin/env bash
# run-python-tests.sh: the python layer of `make test`: unittest over python/tests against the
# library in $CUDAEP_LIBRARY (the Makefile sets it to build/libcudaep.so). Fails when the run
# fails or when no test ran at all (Python 3.11's unittest exits 0 on "Ran 0 tests").
set -euo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} python3 -m unittest discover -s python/tests -t python -v \
	2>&1 | tee "$log" || status=$?
if ! grep -Eq '^Ran [1-9][0-9]* tests? in' "$log"; then
	echo "error: python unittest ran no test" >&2
	exit 1
fi
exit "$status"
