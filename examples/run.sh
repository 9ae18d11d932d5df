#!/usr/bin/env bash
# examples/run.sh ROOT
#
# The example as a host project builds it: installs cudaep into a temporary prefix
# (make install), configures examples/mlp_server against it with find_package(cudaep), builds
# it and runs it on $CUDAEP_TEST_BACKEND (default sim). Run by ctest.
set -euo pipefail
root=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# The outer make's jobserver is not ours to use.
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -C "$root" --no-print-directory install PREFIX="$prefix" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; exit 1; }
cmake -S "$root/examples/mlp_server" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 ||
	{ cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
TMPDIR=$tmp "$tmp/build/mlp_server" --backend "${CUDAEP_TEST_BACKEND:-sim}" --tokens 24 --prompt 16
