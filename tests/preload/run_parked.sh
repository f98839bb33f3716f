#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The preload's parked registration without a device: runs parked_fake
# under the preload (none backend, stats at exit) and checks the misses.
#   usage: run_parked.sh PARKED_FAKE PRELOAD_SO
set -uo pipefail
case "${1:-}" in
-h | --help) sed -n '3,5{s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
# Under ASan its runtime comes first in LD_PRELOAD.
asan=$(ldd "$1" 2>/dev/null | awk '/libasan/ && !n++ { print $3 }')
out=$(LD_PRELOAD="${asan:+$asan }$2" GDRC_BACKEND=none GDRC_STATS=1 GDRC_LOG_LEVEL=info \
	"$1" 2>&1)
rc=$?
echo "$out" | grep -v '^gdrc.*info: gpu support off'
[ $rc -eq 0 ] || exit 1
misses=$(echo "$out" | grep -o '"misses": [0-9]*' | tail -1 | grep -o '[0-9]*$')
hits=$(echo "$out" | grep -o '"hits": [0-9]*' | tail -1 | grep -o '[0-9]*$')
echo "parked: misses ${misses:-?}, hits ${hits:-?}"
[ "${misses:-}" = 3 ] || { echo "parked: expected 3 misses"; exit 1; }
