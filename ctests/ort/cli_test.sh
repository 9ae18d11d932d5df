#!/usr/bin/env bash
# cli_test.sh ORT_HOST LIBCUDAEP VERSION: ort_host's own command line, which needs no ORT.
#
#   --help, -h    the usage on stdout, status 0, nothing on stderr (no "unknown case --help")
#   --version     status 0; names the cudaep.h ABI; with CUDAEP_LIBRARY=LIBCUDAEP the library's
#                 VERSION, and says when CUDAEP_ORT_LIBRARY / CUDAEP_LIBRARY are not set
#   no case, an unknown case, a case without its folder: the usage on stderr, status 2
set -euo pipefail
host=$1 lib=$2 version=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cli_test: $*" >&2; exit 1; }

# run NAME ARGS...: runs the host with a clean ORT environment, keeping stdout, stderr, status.
run() {
	local name=$1
	shift
	set +e
	env -u CUDAEP_ORT_LIBRARY "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	echo $? >"$tmp/$name.rc"
	set -e
}
expect() { # expect NAME RC
	[ "$(cat "$tmp/$1.rc")" = "$2" ] ||
		fail "$1: status $(cat "$tmp/$1.rc"), want $2; stdout: $(cat "$tmp/$1.out"); stderr: $(cat "$tmp/$1.err")"
}

for flag in --help -h; do
	run help env -u CUDAEP_LIBRARY "$host" "$flag"
	expect help 0
	head -n 1 "$tmp/help.out" | grep -q '^usage: ort_host \[--cpu-only\] CASE \[ARGS\]$' || fail "$flag: no usage on stdout"
	grep -q 'node_tests' "$tmp/help.out" || fail "$flag: the usage lists no cases"
	[ ! -s "$tmp/help.err" ] || fail "$flag: wrote to stderr: $(cat "$tmp/help.err")"
done

run version env -u CUDAEP_LIBRARY "$host" --version
expect version 0
abi=$(sed -n 's/^#define CUDAEP_ABI_VERSION \([0-9]*\)$/\1/p' "$(dirname "$0")/../../include/cudaep.h")
grep -q "built against cudaep.h ABI $abi," "$tmp/version.out" || fail "--version: no ABI $abi in: $(cat "$tmp/version.out")"
grep -q '^ONNX Runtime: CUDAEP_ORT_LIBRARY is not set$' "$tmp/version.out" || fail "--version: $(cat "$tmp/version.out")"
grep -q '^cudaep: CUDAEP_LIBRARY is not set$' "$tmp/version.out" || fail "--version: $(cat "$tmp/version.out")"

run version_lib env CUDAEP_LIBRARY="$lib" "$host" --version
expect version_lib 0
grep -q "^cudaep: $version, ABI $abi ($lib)\$" "$tmp/version_lib.out" ||
	fail "--version with CUDAEP_LIBRARY: $(cat "$tmp/version_lib.out")"

run version_bad env CUDAEP_LIBRARY="$tmp/nonexistent.so" "$host" --version
expect version_bad 0
grep -q "^cudaep: cannot load $tmp/nonexistent.so" "$tmp/version_bad.out" || fail "--version, bad path: $(cat "$tmp/version_bad.out")"

for args in "" "--cpu-only" "no_such_case" "mlp"; do
	# shellcheck disable=SC2086 # the arguments are meant to be split
	run usage "$host" $args
	expect usage 2
	grep -q '^usage: ort_host' "$tmp/usage.err" || fail "'$args': no usage on stderr"
	[ ! -s "$tmp/usage.out" ] || fail "'$args': wrote to stdout: $(cat "$tmp/usage.out")"
done
grep -q '^unknown case' "$tmp/usage.err" && fail "'mlp': said unknown case"
run unknown "$host" no_such_case
grep -q '^unknown case no_such_case$' "$tmp/unknown.err" || fail "no_such_case: $(cat "$tmp/unknown.err")"
echo "cli_test: --help, -h, --version and the usage errors behave"
