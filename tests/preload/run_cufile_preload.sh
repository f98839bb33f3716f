#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cufile_client TEST plain, then under the preload (GDRC_STATS=1), and for
# transparency and cache also preloaded with GDRC_PRELOAD_CUFILE=0 (plain
# results expected), against the fake libcufile and the fake CUDA driver.
#   usage: run_cufile_preload.sh CLIENT PRELOAD_SO FAKE_CUDA FAKE_CUFILE TEST
set -uo pipefail
case "${1:-}" in
-h | --help) sed -n '3,6{s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
[ $# -eq 5 ] || { sed -n '6{s/^# \{0,1\}//p}' "$0"; exit 2; }
client=$1 so=$2 test=$5
export GDRC_CUDA_LIBRARY=$3 GDRC_CUFILE_LIBRARY=$4
# Under ASan its runtime comes first in LD_PRELOAD.
asan=$(ldd "$client" 2>/dev/null | awk '/libasan/ && !n++ { print $3 }')
preload="${asan:+$asan }$so"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export TMPDIR=$dir
failed=0

# run NAME MODE [VAR=VALUE...]: the client, its output in $dir/NAME.*.
run() {
	local name=$1 mode=$2 rc
	shift 2
	env "$@" "$client" "$test" "$mode" >"$dir/$name.out" 2>"$dir/$name.err"
	rc=$?
	sed "s/^/$name: /" "$dir/$name.out" "$dir/$name.err"
	if [ $rc -ne 0 ]; then
		echo "$name: exit $rc"
		failed=1
	fi
}

fail() {
	echo "FAIL: $*"
	failed=1
}

run plain plain
run preload preload LD_PRELOAD="$preload" GDRC_STATS=1
case $test in
transparency | cache)
	run off plain LD_PRELOAD="$preload" GDRC_PRELOAD_CUFILE=0
	;;
esac

case $test in
transparency)
	# Every status the same, plain and preloaded.
	diff "$dir/plain.out" "$dir/preload.out" ||
		fail "the preloaded program's statuses differ"
	diff "$dir/plain.out" "$dir/off.out" ||
		fail "with GDRC_PRELOAD_CUFILE=0 the statuses differ"
	;;
free)
	n=$(grep -c 'freed memory it had registered with cuFileBufRegister' \
		"$dir/preload.err")
	[ "$n" = 1 ] || fail "the free warning was logged $n times, not once"
	grep -q 'cufile: .* 3 freed while registered' "$dir/preload.err" ||
		fail "the exit line does not count 3 freed registrations"
	grep -q '"free_deregs": 2' "$dir/preload.err" ||
		fail "free_deregs is not 2 (the two allocations)"
	;;
esac
# The preload's own lines at exit: what it served.
grep -q 'preload: cufile: registrations' "$dir/preload.err" ||
	fail "no cufile line at exit with GDRC_STATS=1"
[ $failed -eq 0 ] && echo "cufile $test: plain and preloaded as expected"
exit $failed
