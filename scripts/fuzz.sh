#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan,
# and runs each for a bounded time, starting from the checked-in corpus
# (a copy: new units stay in the build folder).  Prints libFuzzer's final
# statistics (executions, coverage); a crash fails with its input saved.
# Usage: scripts/fuzz.sh [SECONDS per target, default 60] [build folder]
set -euo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
dir=${2:-$top/build-fuzz}

bash "$top/scripts/deps.sh"
CC=clang-14 cmake -S "$top" -B "$dir" -DGDRC_FUZZ=ON \
	"-DGDRC_SANITIZE=address;undefined" -DGDRC_BUILD_TESTS=OFF \
	-DGDRC_BUILD_EXAMPLES=OFF -DGDRC_BUILD_BENCH=OFF -DGDRC_BUILD_KMOD=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j"$(nproc)" --target fuzz_cache >/dev/null
for t in fuzz_cache; do
	corpus=$dir/corpus-$t
	mkdir -p "$corpus" "$dir/artifacts"
	cp "$top/tests/fuzz/corpus/"* "$corpus/"
	echo "== $t: $secs s from $(ls "$top/tests/fuzz/corpus" | wc -l) seed(s)"
	ASAN_OPTIONS=detect_leaks=1 "$dir/tests/fuzz/$t" \
		-max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$dir/artifacts/" "$corpus" 2>"$dir/$t.log" || {
		tail -n 40 "$dir/$t.log"
		echo "$t: FAILED (input in $dir/artifacts/)"
		exit 1
	}
	grep -E "^#[0-9]+[[:space:]]+DONE|stat::(number_of_executed_units|new_units_added|peak_rss_mb)" \
		"$dir/$t.log"
done
