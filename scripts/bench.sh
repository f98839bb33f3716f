#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job for now: builds the library and runs the cache benchmark
# (hit, miss and lookup costs, thread scaling, and UCX's rcache on the
# same ranges in the same run).  Prints a table; the JSON lands in
# build-bench/bench.json.  Usage: scripts/bench.sh [--quick]
set -euo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/build-bench

bash "$top/scripts/deps.sh"
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j"$(nproc)" --target gdrc-bench >/dev/null
"$dir/tests/bench/gdrc-bench" --json "$dir/bench.json" "$@"
echo "json: $dir/bench.json"
