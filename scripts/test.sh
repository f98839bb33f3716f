#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs every test: installs what is missing, then builds and runs ctest
# twice (plain, then with ASan+UBSan), and checks that the installed
# package builds a program.  Usage: scripts/test.sh [build-dir-prefix]
set -euo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$top/build}
jobs=$(nproc)

bash "$top/scripts/deps.sh"

passed=0
skipped=0
# run_suite DIR "CTEST ARGS" CMAKE ARGS...
run_suite() {
	local dir=$1 ctest_args=$2 n s
	shift 2
	cmake -S "$top" -B "$dir" -DGDRC_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j"$jobs" >/dev/null
	# shellcheck disable=SC2086 # ctest_args is a list of words
	(cd "$dir" && ctest --output-on-failure -j"$jobs" $ctest_args) |
		tee "$dir/ctest.log"
	# Every test's output, skipped ones' too (for their reason at the
	# end): a later ctest in $dir rewrites LastTest.log.
	cp "$dir/Testing/Temporary/LastTest.log" "$dir/ctest-output.log"
	n=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' \
		"$dir/ctest.log")
	s=$(grep -c '^[[:space:]]*[0-9]* - .* (Skipped)$' "$dir/ctest.log" || true)
	passed=$((passed + ${n:-0} - s))
	skipped=$((skipped + s))
}

echo "== plain build"
run_suite "$prefix-test" "" -DCMAKE_BUILD_TYPE=RelWithDebInfo

# The VM lab's programs too: the guests see the host's libasan (the
# preload test puts it first in LD_PRELOAD itself).
echo "== ASan+UBSan build"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	run_suite "$prefix-asan" "" -DCMAKE_BUILD_TYPE=Debug \
	"-DGDRC_SANITIZE=address;undefined"

# Races (a get with an unmap, a put with a retire) showed under ASan's
# timing about once in a hundred runs of test_threads
# (docs/reliability.md): a hundred more runs there, the whole output
# shown if one fails.
echo "== ASan+UBSan: test_threads 100 times"
if ! (cd "$prefix-asan" && ASAN_OPTIONS=detect_leaks=1 ctest \
	--output-on-failure --repeat until-fail:100 -R '^test_threads$') \
	>"$prefix-asan/threads.log" 2>&1; then
	cat "$prefix-asan/threads.log"
	exit 1
fi
tail -n 3 "$prefix-asan/threads.log"
passed=$((passed + 1))

# TSan over the cache, the threads and the hooks (hook context itself is
# left uninstrumented: GDRC_HOOK_CONTEXT in lib/gdrc_int.h).
echo "== TSan: the cache, thread and hook tests"
tsan_tests="test_threads test_parked test_cache test_lru test_index test_cell test_alloc_stress test_stress_remap test_uring_stale
	test_stress_remap_wide
	test_hooks test_hooks_lost test_cuda_hooks test_detour test_fork test_misuse
	test_exit test_signal_remap test_uffd test_cufile"
# The remap stress again on userfaultfd's events: patching nothing, it
# runs under TSan where the glibc hooks cannot.
tsan_more="test_stress_remap_uffd test_uring_stale_uffd test_stress_remap_uring test_stress_remap_uring_uffd test_signal_remap_uffd"
cmake -S "$top" -B "$prefix-tsan" -DGDRC_WERROR=ON -DCMAKE_BUILD_TYPE=Debug \
	-DGDRC_SANITIZE=thread -DGDRC_BUILD_KMOD=OFF >/dev/null
# shellcheck disable=SC2086 # a list of targets
cmake --build "$prefix-tsan" -j"$jobs" --target $tsan_tests >/dev/null
(cd "$prefix-tsan" && TSAN_OPTIONS=halt_on_error=1 \
	ctest --output-on-failure -R "^($(echo $tsan_tests $tsan_more | tr ' ' '|'))\$") |
	tee "$prefix-tsan/ctest.log"
cp "$prefix-tsan/Testing/Temporary/LastTest.log" "$prefix-tsan/ctest-output.log"
n=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' \
	"$prefix-tsan/ctest.log")
[ -n "$n" ] || { echo "TSan: a test failed"; exit 1; }
s=$(grep -c '^[[:space:]]*[0-9]* - .* (Skipped)$' "$prefix-tsan/ctest.log" || true)
passed=$((passed + n - s))
skipped=$((skipped + s))

# valgrind replaces glibc's allocator (the tests of its internal unmaps
# skip) and refuses the fake driver's 64 GiB reservation (4 GiB here).
echo "== valgrind memcheck: the unit tests"
GDRC_TEST_VALGRIND=1 FAKE_CUDA_VA_GIB=4 run_suite "$prefix-valgrind" \
	"-L unit -LE ^(vm|kmod|gpu|bench)\$" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DGDRC_BUILD_KMOD=OFF "-DGDRC_TEST_LAUNCHER=valgrind;-q;--error-exitcode=9;--leak-check=full;--errors-for-leak-kinds=definite;--show-leak-kinds=definite;--smc-check=all;--child-silent-after-fork=yes"

echo "== libFuzzer: API calls and memory events, invariants after every step"
bash "$top/scripts/fuzz.sh" "${GDRC_FUZZ_SECONDS:-60}" "$prefix-fuzz"
passed=$((passed + 1))

echo "== install and build an example against the installed package"
inst=$(mktemp -d)
trap 'rm -rf "$inst"' EXIT
cmake --install "$prefix-test" --prefix "$inst" >/dev/null
pc="pkg-config --define-variable=prefix=$inst"
export PKG_CONFIG_PATH="$inst/lib/pkgconfig:$inst/lib/x86_64-linux-gnu/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror -pedantic \
	"$top/examples/01_register_host.c" -o "$inst/example" \
	$($pc --cflags gdrcache) $($pc --libs gdrcache)
LD_LIBRARY_PATH="$inst/lib:$inst/lib/x86_64-linux-gnu" "$inst/example"
cmake -S "$top/examples/cmake" -B "$inst/consumer" \
	-DCMAKE_PREFIX_PATH="$inst" >/dev/null
cmake --build "$inst/consumer" >/dev/null
LD_LIBRARY_PATH="$inst/lib:$inst/lib/x86_64-linux-gnu" \
	"$inst/consumer/consumer"
passed=$((passed + 2))
echo "== installed package: pkg-config and find_package consumers ran"

# Each skipped test with its reason (the last line of its output that
# says skip), so that a skip that should not happen here is seen.
echo "== skipped tests and why"
for suite in plain:test asan:asan tsan:tsan valgrind:valgrind; do
	dir=$prefix-${suite#*:}
	sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$dir/ctest.log" |
	while read -r t; do
		# LastTest.log: "N/M Test: NAME", ..., "Output:", a rule, the
		# output, "<end of output>".
		why=$(awk -v t="$t" '
			/^[0-9]+\/[0-9]+ Test: / { cur = $3 }
			$0 == "<end of output>" { on = 0 }
			on && tolower($0) ~ /skip/ { why = $0 }
			$0 == "Output:" && cur == t { on = 1 }
			END { sub(/^[ \t]+/, "", why); print why }' "$dir/ctest-output.log")
		echo "${suite%:*}: $t: ${why:-no reason printed}"
	done
done
echo "all: $passed passed, 0 failed, $skipped skipped"
