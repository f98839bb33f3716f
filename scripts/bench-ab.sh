#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench-ab.sh - did a change make the hit path slower?  Builds gdrc-bench
# from BASE (another source tree of the project, e.g. the last commit
# before the change, unpacked with git archive) and from this tree, runs
# them in PAIRS alternating pairs (base first in odd pairs, new first in
# even ones) with --gpu-only (the host hit, and the GPU hits where there
# is a GPU), and prints for each row the median over the pairs of the
# base's and the new build's median ns, and of the paired difference
# new - base.  Both builds: RelWithDebInfo, same compiler, same machine.
# GDRC_AB_RUN, if set, is put before each run (e.g. "taskset -c 3");
# GDRC_CUDA_LIBRARY=none leaves the host rows alone (faster runs).
#
#   usage: scripts/bench-ab.sh BASE [PAIRS] [OUTDIR]
#          (default PAIRS: 9, OUTDIR: ./bench-ab-out)
#   e.g.   git archive HEAD~3 | (mkdir -p /tmp/base && tar -x -C /tmp/base)
#          scripts/bench-ab.sh /tmp/base
set -euo pipefail

case "${1:-}" in
-h | --help | '') # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	[ -n "${1:-}" ] || exit 2
	exit 0 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "$1" && pwd)
pairs=${2:-9}
out=${3:-bench-ab-out}
work=${GDRC_AB_BUILD:-/tmp/gdrc-ab}
mkdir -p "$out"

# The base side is configured afresh: a folder left by another BASE
# would refuse the new source.
rm -rf "$work/base"
for side in base new; do
	src=$top
	[ $side = base ] && src=$base
	if ! cmake -S "$src" -B "$work/$side" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DGDRC_BUILD_EXAMPLES=OFF -DGDRC_BUILD_KMOD=OFF \
		>"$out/build-$side.txt" 2>&1 ||
	   ! cmake --build "$work/$side" -j"$(nproc)" --target gdrc-bench \
		>>"$out/build-$side.txt" 2>&1; then
		tail -n 20 "$out/build-$side.txt"
		echo "bench-ab: the $side build failed" >&2
		exit 1
	fi
done

run() { # run SIDE PAIR
	# shellcheck disable=SC2086 # a command and its arguments
	${GDRC_AB_RUN:-} "$work/$1/tests/bench/gdrc-bench" --gpu-only \
		>"$out/$1-$2.txt" 2>&1
}
for i in $(seq 1 "$pairs"); do
	if ((i % 2)); then run base "$i"; run new "$i"; else run new "$i"; run base "$i"; fi
done

# Rows "a. ..." and "g. ..." whose last two fields are numbers (best,
# median): the median column of each run.
awk -v pairs="$pairs" '
function med(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
		}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FNR == 1 {
	split(FILENAME, p, /[-.]/)
	side = p[length(p) - 2]; pair = p[length(p) - 1]
	sub(/.*\//, "", side)
	delete inrun
}
/^[ag]\. / && $NF ~ /^[0-9.]+$/ && $(NF - 1) ~ /^[0-9.]+$/ {
	row = $0
	sub(/[[:space:]]+[0-9.]+[[:space:]]+[0-9.]+$/, "", row)
	# A label seen before in this run (the VMM rows repeat theirs):
	# numbered.
	if (++inrun[row] > 1)
		row = row " #" inrun[row]
	if (!(row in seen)) { seen[row] = 1; order[++nrows] = row }
	v[row, side, pair] = $NF
}
END {
	printf "%-44s %9s %9s %9s %7s\n", "row (ns, medians over " pairs " pairs)",
		"base", "new", "new-base", "pairs"
	for (r = 1; r <= nrows; r++) {
		row = order[r]; n = 0
		for (i = 1; i <= pairs; i++) {
			if (!((row, "base", i) in v) || !((row, "new", i) in v))
				continue
			n++
			b[n] = v[row, "base", i]; w[n] = v[row, "new", i]
			d[n] = w[n] - b[n]
		}
		if (n)
			printf "%-44s %9.2f %9.2f %+9.2f %7d\n", row, med(b, n),
				med(w, n), med(d, n), n
	}
}' "$out"/base-*.txt "$out"/new-*.txt | tee "$out/summary.txt"
