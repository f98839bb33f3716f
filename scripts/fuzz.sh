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
# run TARGET SECONDS LOG [ENV...]: one bounded run on the target's corpus.
run() {
	local t=$1 s=$2 log=$3
	shift 3
	env ASAN_OPTIONS=detect_leaks=1${ASAN_EXTRA:-} "$@" "$dir/tests/fuzz/$t" \
		-max_total_time="$s" -print_final_stats=1 \
		-artifact_prefix="$dir/artifacts/" "$dir/corpus-$t" 2>"$log" || {
		tail -n 40 "$log"
		echo "$t: FAILED (input in $dir/artifacts/)"
		exit 1
	}
	grep -E "^fuzz_cache: host events|^#[0-9]+[[:space:]]+DONE|stat::(number_of_executed_units|new_units_added|peak_rss_mb)" \
		"$log"
}
for t in fuzz_cache; do
	mkdir -p "$dir/corpus-$t" "$dir/artifacts"
	cp "$top/tests/fuzz/corpus/"* "$dir/corpus-$t/"
	echo "== $t: $secs s from $(ls "$top/tests/fuzz/corpus" | wc -l) seed(s)"
	run "$t" "$secs" "$dir/$t.log"
done
# Again with UCX's UCM owning glibc (libucs preloaded: its constructor
# patches first), so that UCM's events are the only host source; a
# third of the time.  ASan's runtime then is not first in the list.
# awk reads to the end: with pipefail, an early exit would kill ldconfig
# with SIGPIPE (its list passes the 64 KiB pipe buffer) and fail the script.
ucs=$(ldconfig -p 2>/dev/null | awk '/libucs\.so\.0 / && !n++ { print $NF }')
if [ -n "$ucs" ]; then
	echo "== fuzz_cache with UCX's UCM events ($ucs preloaded)"
	ASAN_EXTRA=:verify_asan_link_order=0 run fuzz_cache \
		$(( secs / 3 > 5 ? secs / 3 : 5 )) "$dir/fuzz_cache_ucm.log" \
		LD_PRELOAD="$ucs"
	grep -q "^fuzz_cache: host events: ucx ucm" "$dir/fuzz_cache_ucm.log" || {
		echo "fuzz_cache: UCM's events were not the host source"
		exit 1
	}
fi
# And with userfaultfd as the only host source (GDRC_MEM_HOOKS=uffd:
# nothing patched, each cached range watched), a third of the time.
echo "== fuzz_cache with userfaultfd's events (GDRC_MEM_HOOKS=uffd)"
run fuzz_cache $(( secs / 3 > 5 ? secs / 3 : 5 )) "$dir/fuzz_cache_uffd.log" \
	GDRC_MEM_HOOKS=uffd
if ! grep -q "^fuzz_cache: host events: userfaultfd" "$dir/fuzz_cache_uffd.log"; then
	if grep -q "^fuzz_cache: host events: none" "$dir/fuzz_cache_uffd.log"; then
		echo "fuzz_cache: userfaultfd unavailable here: that pass checked nothing"
	else
		echo "fuzz_cache: userfaultfd's events were not the host source"
		exit 1
	fi
fi
