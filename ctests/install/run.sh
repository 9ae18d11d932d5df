#!/usr/bin/env bash
# install/run.sh ROOT VERSION
#
# Installs cudaep with `make install PREFIX=<temp>` and builds the throwaway host project in
# install/host against it twice — through find_package(cudaep) and through
# `pkg-config --cflags --libs cudaep` — running each build (the pkg-config one without
# LD_LIBRARY_PATH: the .pc carries an rpath to the installed library). Also checks the versions,
# that find_package refuses an incompatible version request, and that the installed tree can
# be moved (the CMake config locates itself).
set -euo pipefail
root=$1 version=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

# The outer make's jobserver is not ours to use.
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -C "$root" --no-print-directory install PREFIX="$prefix" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log"; exit 1; }
for f in lib/libcudaep.so include/cudaep.h lib/pkgconfig/cudaep.pc \
	lib/cmake/cudaep/cudaepConfig.cmake lib/cmake/cudaep/cudaepConfigVersion.cmake; do
	[ -f "$prefix/$f" ] || { echo "make install did not install $f" >&2; exit 1; }
done

echo "--- find_package(cudaep $version)"
cmake -S "$here/host" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCUDAEP_REQUEST_VERSION="$version" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
"$tmp/cmake-build/host" "$version"

echo "--- find_package(cudaep 99.0) must be refused"
if cmake -S "$here/host" -B "$tmp/cmake-too-new" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCUDAEP_REQUEST_VERSION=99.0 >"$tmp/too-new.log" 2>&1; then
	echo "find_package accepted version 99.0 of a $version install" >&2
	exit 1
fi
grep -q "$version" "$tmp/too-new.log" || { cat "$tmp/too-new.log"; exit 1; }

echo "--- pkg-config --cflags --libs cudaep"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
got=$(pkg-config --modversion cudaep)
[ "$got" = "$version" ] || { echo "pkg-config says version $got, want $version" >&2; exit 1; }
pc_libs=$(pkg-config --libs cudaep)
case " $pc_libs " in
*" -Wl,-rpath,$prefix/lib "*) ;;
*) echo "pkg-config --libs cudaep gives '$pc_libs': no -Wl,-rpath,$prefix/lib" >&2; exit 1 ;;
esac
# shellcheck disable=SC2046 # pkg-config's output is meant to be word-split
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/host-pc" "$here/host/host.c" $(pkg-config --cflags --libs cudaep)
# The host must start as built, the way README shows it: without LD_LIBRARY_PATH, finding the
# installed library through the rpath (not some other libcudaep.so on the loader's path).
resolved=$(env -u LD_LIBRARY_PATH ldd "$tmp/host-pc" | sed -n 's/^[[:space:]]*libcudaep\.so => \([^ ]*\).*/\1/p')
if [ "$resolved" != "$prefix/lib/libcudaep.so" ]; then
	echo "the pkg-config host resolves libcudaep.so to '${resolved:-nothing}', want $prefix/lib/libcudaep.so" >&2
	exit 1
fi
env -u LD_LIBRARY_PATH "$tmp/host-pc" "$version"

echo "--- the installed tree, moved, still configures"
mv "$prefix" "$tmp/moved"
cmake -S "$here/host" -B "$tmp/cmake-moved" -DCMAKE_PREFIX_PATH="$tmp/moved" >"$tmp/moved.log" 2>&1 ||
	{ cat "$tmp/moved.log"; exit 1; }
cmake --build "$tmp/cmake-moved" >"$tmp/moved-build.log" 2>&1 || { cat "$tmp/moved-build.log"; exit 1; }
"$tmp/cmake-moved/host" "$version"
echo "install: ok"
