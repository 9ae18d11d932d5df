#!/usr/bin/env bash
# abi-check.sh: the ABI check layer of `make test`.
#
#   1. include/cudaep.h (the public header, the one to edit) and capi/cudaep.h (its tracked
#      copy for the cgo preambles, so that Go's build cache sees it) must be byte-identical.
#      `make` refreshes the copy from an edited include/cudaep.h (scripts/header-copy.sh, which
#      refuses a commit whose copy differs); this check never does, so a stale or hand-edited
#      copy fails here instead of being papered over.
#   2. The public header must compile on its own as strict C99, C11 and C++17 (its static
#      assertions pin the struct layouts).
# `make test-abi` then builds the library, where every //export is compiled against the
# header's declarations, so a signature that drifts from the header fails to build.
set -euo pipefail
cd "$(dirname "$0")/.."

public=include/cudaep.h copy=capi/cudaep.h
if ! cmp -s "$public" "$copy"; then
	echo "abi-check: $copy differs from $public:" >&2
	diff -u "$public" "$copy" | head -40 >&2 || true
	echo "abi-check: edit $public, run make (it refreshes $copy), and commit both." >&2
	exit 1
fi

cc=${CC:-cc}
cxx=${CXX:-c++}
langs="C99, C11"
for std in c99 c11; do
	echo '#include "cudaep.h"' | "$cc" -std=$std -Wall -Wextra -Werror -pedantic \
		-Iinclude -fsyntax-only -x c - || { echo "abi-check: $public does not compile as $std" >&2; exit 1; }
done
if command -v "$cxx" >/dev/null 2>&1; then
	echo '#include "cudaep.h"' | "$cxx" -std=c++17 -Wall -Wextra -Werror -pedantic \
		-Iinclude -fsyntax-only -x c++ - || { echo "abi-check: $public does not compile as C++17" >&2; exit 1; }
	langs="$langs, C++17"
fi
echo "abi-check: $copy matches $public; the header compiles as $langs"
