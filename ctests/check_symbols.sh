#!/usr/bin/env bash
# check_symbols.sh LIBRARY HEADER
#
# The library's dynamic symbol table (nm -D) must hold exactly the functions HEADER declares
# with CUDAEP_API, plus the two entry points of the ONNX Runtime plugin EP (CreateEpFactories,
# ReleaseEpFactory): none missing (a host would fail to link) and nothing else (the linker
# version script hides the Go runtime and cgo symbols).
set -euo pipefail
lib=$1 header=$2

declared=$( (sed -n 's/^CUDAEP_API.*[ *]\(CudaEp[A-Za-z0-9_]*\)(.*/\1/p' "$header"; printf 'CreateEpFactories\nReleaseEpFactory\n') | sort -u)
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)

[ -n "$declared" ] || { echo "no CUDAEP_API declarations found in $header" >&2; exit 1; }
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
status=0
if [ -n "$missing" ]; then
	echo "declared in $header but not exported by $lib:" >&2
	echo "$missing" | sed 's/^/  /' >&2
	status=1
fi
if [ -n "$extra" ]; then
	echo "exported by $lib but not declared in $header:" >&2
	echo "$extra" | sed 's/^/  /' >&2
	status=1
fi
[ $status -eq 0 ] && echo "exported symbols: $(echo "$declared" | wc -l): the header's CudaEp* functions and the two ORT plugin entry points"
exit $status
