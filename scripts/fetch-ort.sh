#!/usr/bin/env bash
# fetch-ort.sh VERSION DEST
#
# Puts ONNX Runtime VERSION's Linux x86-64 libonnxruntime.so.1 into DEST (for the ORT test host,
# ctests/ort). ORT publishes no plain C tarball on a registry we use, but the npm package
# onnxruntime-node carries the library: `npm pack onnxruntime-node@VERSION`, then
# package/bin/napi-v6/linux/x64/libonnxruntime.so.1 out of the tarball. Nothing is downloaded
# when DEST already holds that version (DEST/VERSION says which); the tarball is not kept.
#
# ORT 1.23.x loads libonnxruntime_providers_shared.so from its own folder when an EP library is
# registered, and the npm package does not ship it; for those versions a stub (one empty
# Provider_SetHost) is compiled next to the library.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 VERSION DEST" >&2
	exit 2
fi
version=$1 dest=$2
case $version in
*[!0-9.]* | "") echo "fetch-ort: \"$version\" is not a version like 1.30.0" >&2; exit 2 ;;
esac
lib=$dest/libonnxruntime.so.1
member=package/bin/napi-v6/linux/x64/libonnxruntime.so.1

needs_stub=0
case $version in 1.23.*) needs_stub=1 ;; esac

if [ -s "$lib" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ] &&
	{ [ $needs_stub = 0 ] || [ -s "$dest/libonnxruntime_providers_shared.so" ]; }; then
	echo "fetch-ort: ORT $version already in $dest"
	exit 0
fi

if [ "$(uname -s)/$(uname -m)" != "Linux/x86_64" ]; then
	echo "fetch-ort: only Linux x86-64 is supported (this is $(uname -s)/$(uname -m))" >&2
	exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "fetch-ort: npm is needed to fetch onnxruntime-node@$version (apt-get install npm)" >&2
	exit 1
fi

mkdir -p "$dest"
tmp=$(mktemp -d "$dest/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "fetch-ort: npm pack onnxruntime-node@$version"
(cd "$tmp" && npm pack --silent "onnxruntime-node@$version" >/dev/null)
tgz=$(find "$tmp" -maxdepth 1 -name 'onnxruntime-node-*.tgz' | head -n 1)
if [ -z "$tgz" ]; then
	echo "fetch-ort: npm pack produced no tarball for onnxruntime-node@$version" >&2
	exit 1
fi
if ! tar -xzf "$tgz" -C "$tmp" "$member"; then
	echo "fetch-ort: onnxruntime-node@$version has no $member" >&2
	exit 1
fi
rm -f "$tgz"

if [ $needs_stub = 1 ]; then
	cc=${CC:-cc}
	printf 'void Provider_SetHost(void* host) { (void)host; }\n' >"$tmp/stub.c"
	"$cc" -shared -fPIC -O2 -o "$tmp/libonnxruntime_providers_shared.so" "$tmp/stub.c"
	mv -f "$tmp/libonnxruntime_providers_shared.so" "$dest/libonnxruntime_providers_shared.so"
fi

# Replace atomically, then record the version (a half-done fetch leaves no VERSION behind).
rm -f "$dest/VERSION"
mv -f "$tmp/$member" "$lib"
echo "$version" >"$dest/VERSION"
echo "fetch-ort: ORT $version in $lib ($(wc -c <"$lib") bytes)"
