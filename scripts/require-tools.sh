#!/usr/bin/env bash
# require-tools.sh TOOL:DEBIAN_PACKAGE ...
#
# Makes sure each TOOL is on PATH. A missing one is installed with apt-get when that is
# possible (running as root on a Debian-like system: `apt-get update` once, then
# `apt-get install -y PACKAGE`); otherwise the script stops with a message naming the tool.
set -euo pipefail

missing=() packages=()
for spec in "$@"; do
	tool=${spec%%:*} pkg=${spec#*:}
	command -v "$tool" >/dev/null 2>&1 || { missing+=("$tool"); packages+=("$pkg"); }
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "require-tools: installing ${packages[*]} for ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# A failure here is reported below, by naming the tools still missing.
	apt-get update -qq || true
	apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null || true
fi

for tool in "${missing[@]}"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "error: $tool is required but not installed, and installing it failed or was not" \
			"possible (that needs root and apt-get). Install it and rerun." >&2
		exit 1
	fi
done
