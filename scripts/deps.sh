#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages the build, tests and benchmark need, when
# any is missing.  Sourced or run by scripts/test.sh and scripts/bench.sh.
set -euo pipefail

GDRC_DEB_PACKAGES=(build-essential cmake pkg-config libcmocka-dev uthash-dev
	libibverbs-dev ibverbs-providers libucx-dev libjemalloc2 libmimalloc2.0
	gnuplot-nox libopenmpi-dev openmpi-bin clang-14 libclang-rt-14-dev
	valgrind libfabric-bin libfabric-dev ucx-utils liburing-dev)

missing=()
for p in "${GDRC_DEB_PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "gdrcache: installing ${missing[*]}"
	if [ "$(id -u)" -eq 0 ]; then
		sudo=()
	elif command -v sudo >/dev/null; then
		sudo=(sudo)
	else
		echo "gdrcache: need root or sudo to install ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
fi
