#!/usr/bin/env bash
# header-copy.sh HEADER COPY
#
# Keeps COPY (capi/cudaep.h, the copy the cgo preambles include) byte-identical to HEADER
# (include/cudaep.h, the public header and the only one to edit). Both files are tracked by git,
# so that `go build ./...` works in a fresh clone. The Makefile runs this before every build and
# before the Go layers of `make test`.
#
#   * identical: nothing to do.
#   * in a git work tree where neither file has uncommitted changes: the commit itself is
#     inconsistent (the header changed without its copy, or the copy was committed edited). Fail
#     loudly, naming both files: a stale committed copy must never pass `make test`, and make
#     must not paper over it by refreshing the copy in a fresh clone.
#   * HEADER has changes of its own (uncommitted, or newer than COPY outside git) and COPY has
#     none: refresh COPY from HEADER and say so (commit both).
#   * otherwise COPY was edited by hand: refuse, naming the file to edit instead.
#
# Exit status: 0 when COPY is (now) identical to HEADER, 1 otherwise, 2 for bad arguments.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: header-copy.sh HEADER COPY" >&2
	exit 2
fi
header=$1 copy=$2
if [ ! -f "$header" ]; then
	echo "error: $header (the public header) does not exist" >&2
	exit 1
fi
if [ -f "$copy" ] && cmp -s "$header" "$copy"; then
	exit 0
fi
if [ ! -f "$copy" ]; then
	cp "$header" "$copy"
	echo "header-copy: made $copy from $header"
	exit 0
fi

# In a git work tree that tracks both files, changed FILE is true when FILE differs from HEAD.
# Without git (a source tarball) the modification times decide, as make would.
in_git=0
if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
	git ls-files --error-unmatch -- "$header" "$copy" >/dev/null 2>&1; then
	in_git=1
fi
changed() { ! git diff --quiet HEAD -- "$1"; }

if [ "$in_git" = 1 ]; then
	if ! changed "$header" && ! changed "$copy"; then
		echo "error: $copy differs from $header as both are committed (HEAD $(git rev-parse --short HEAD))." >&2
		echo "       A commit changed $header without its copy, or committed an edited copy." >&2
		echo "       Refresh the copy (cp $header $copy) and commit it with the header change." >&2
		exit 1
	fi
	if changed "$header" && ! changed "$copy"; then
		cp "$header" "$copy"
		echo "header-copy: refreshed $copy from $header (commit both files together)"
		exit 0
	fi
	if changed "$header" && [ "$header" -nt "$copy" ]; then
		cp "$header" "$copy"
		echo "header-copy: refreshed $copy from $header (commit both files together)"
		exit 0
	fi
elif [ "$header" -nt "$copy" ]; then
	cp "$header" "$copy"
	echo "header-copy: refreshed $copy from $header"
	exit 0
fi
echo "error: $copy differs from $header and was edited by hand (it has changes of its own)." >&2
echo "       Edit $header (the public header), then run make to refresh the copy;" >&2
echo "       git diff -- $copy shows what the copy's edit was." >&2
exit 1
