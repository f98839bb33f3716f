#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench-ucx.sh - is libgdrcache's cache ahead of UCX's ucs_rcache at
# every size (issue 34)?  Builds gdrc-bench as scripts/bench.sh does,
# runs `gdrc-bench --lookup-only --json` RUNS times on this host, and
# prints one table of the issue's targets, each from a run's medians of
# 5 repetitions, gdrcache and UCX timed in alternating rounds in one
# process:
#   - random-page hit over n cached one-page registrations: gdrc/ucx,
#     at most 0.7 at every n; gdrc/floor (the dependent-load floor), at
#     most 2 from n = 10000 on;
#   - hits rotating over 16384 cached ranges: gdrc/ucx at most 1.0;
#   - one hot range (gdrc-bench's b.: the one-range hits of both,
#     alternating): gdrc/ucx at most 0.3;
#   - resident bytes per registration at the largest n: gdrc's at most
#     UCX's.
# A row holds only when every run meets it.  Each run's one-thread cpu
# loop, timed at the start and the end of its section d., must be within
# 20 % of the first accepted run's start: a run outside that is rejected
# and run again (at most twice more per run), not averaged in.  A run
# still outside after that is kept and marked "*", and a row that would
# hold says "holds?": run again on a quieter host.
# Exit status: 0 whatever the verdicts (a report, not a test); 1 when
# the build or a bench run failed; 2 on a bad argument.
#
#   usage: scripts/bench-ucx.sh [--quick] [RUNS]
#          (default RUNS: 3; --quick is passed to gdrc-bench: 10x fewer
#          iterations, n up to 100000)
#   output: the table, also in build-bench/bench-ucx/summary.txt, beside
#          each run's run-K.json and run-K.txt (a rejected try's:
#          run-K-try-T.json and .txt)
#   GDRC_BENCH=PATH runs that gdrc-bench, built already, instead of
#          installing the dependencies and building (a machine without
#          a package registry, such as the GPU machine)
set -euo pipefail

usage() { # the comment above
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
}

quick=()
runs=3
for arg in "$@"; do
	case "$arg" in
	-h | --help)
		usage
		exit 0 ;;
	--quick)
		quick=(--quick) ;;
	'' | *[!0-9]*)
		echo "bench-ucx: bad argument '$arg'" >&2
		usage >&2
		exit 2 ;;
	*)
		if ((10#$arg < 1)); then
			echo "bench-ucx: RUNS must be at least 1" >&2
			exit 2
		fi
		runs=$((10#$arg)) ;;
	esac
done

top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/build-bench
out=$dir/bench-ucx
bench=${GDRC_BENCH:-$dir/tests/bench/gdrc-bench}

if [ -z "${GDRC_BENCH:-}" ]; then
	bash "$top/scripts/deps.sh"
	if ! cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
		>/dev/null ||
	   ! cmake --build "$dir" -j"$(nproc)" --target gdrc-bench \
		>/dev/null; then
		echo "bench-ucx: the build failed" >&2
		exit 1
	fi
fi
mkdir -p "$out"
rm -f "$out"/run-*.json "$out"/run-*.txt "$out/summary.txt"

# cpu_check JSON REF: "START END ok" or "START END moved": the run's cpu
# loop (medians, ns per step) at both ends of d. within 20 % of REF (its
# own start when REF is empty).
cpu_check() {
	python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
s, e = j["cpu_loop_ns_median"], j["cpu_loop_end_ns_median"]
ref = float(sys.argv[2]) if sys.argv[2] else s
ok = all(abs(v / ref - 1) <= 0.2 for v in (s, e))
print("%.3f %.3f %s" % (s, e, "ok" if ok else "moved"))' "$1" "$2"
}

ref=   # the first accepted run's cpu loop at the start of d.
moved= # runs kept although their cpu loop moved
for k in $(seq 1 "$runs"); do
	for try in 1 2 3; do
		base=$out/run-$k-try-$try
		if ! "$bench" --lookup-only --json "$base.json" "${quick[@]}" \
			>"$base.txt" 2>&1; then
			tail -n 20 "$base.txt" >&2
			echo "bench-ucx: run $k failed (output: $base.txt)" >&2
			exit 1
		fi
		if ! check=$(cpu_check "$base.json" "$ref"); then
			echo "bench-ucx: run $k: no cpu loop in $base.json" >&2
			exit 1
		fi
		read -r start end verdict <<<"$check"
		if [ "$verdict" = ok ] || [ "$try" = 3 ]; then
			break
		fi
		echo "run $k/$runs: cpu loop moved (start $start, end $end" \
			"ns per step; reference ${ref:-$start}): run again"
	done
	mv "$base.json" "$out/run-$k.json"
	mv "$base.txt" "$out/run-$k.txt"
	if [ "$verdict" = ok ]; then
		ref=${ref:-$start}
		echo "run $k/$runs: cpu loop start $start, end $end ns per step"
	else
		moved="$moved $k"
		echo "run $k/$runs: cpu loop still moved after 3 tries (start" \
			"$start, end $end): kept, marked *"
	fi
done

python3 - "$out" "$runs" "$moved" <<'EOF' | tee "$out/summary.txt"
import json
import sys

out, runs = sys.argv[1], int(sys.argv[2])
moved = {int(k) for k in sys.argv[3].split()}
res = [json.load(open("%s/run-%d.json" % (out, k)))
       for k in range(1, runs + 1)]


def med(d, key):
    """A result's median, None where it was not measured."""
    return d.get(key + "_median") if d else None


def ratio(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def verdict(vals, meets):
    """holds only when every run meets the target."""
    if any(v is None for v in vals):
        return "-"
    if not all(meets(v) for v in vals):
        return "fails"
    return "holds?" if moved else "holds"


def cells(vals, fmt="%7.2f"):
    return " ".join(fmt % v if v is not None else "%7s" % "-"
                    for v in vals)


m = res[0]["machine"]
print()
print("gdrc-bench --lookup-only%s, %d run%s: %s, %d CPUs; libgdrcache %s,"
      " ucx %s" % (" --quick" if res[0]["quick"] else "", runs,
                   "s" if runs > 1 else "", m["cpu"], m["ncpu"],
                   m["version"], m["ucx_version"] or "not built"))
print("medians of 5 repetitions; a row holds when every run meets it")
print("cpu loop, ns per step, start/end of d.: " +
      "  ".join("run %d %.2f/%.2f%s" % (k + 1, med(r, "cpu_loop_ns"),
                                       med(r, "cpu_loop_end_ns"),
                                       "*" if k + 1 in moved else "")
                for k, r in enumerate(res)))
if moved:
    print("* its cpu loop moved more than 20 % even after 3 tries: a row"
          " it meets says holds?, run again on a quieter host")

runhdr = " ".join("%7s" % ("run %d" % (k + 1)) for k in range(runs))
print()
print("random-page hit over n cached one-page registrations")
print("%8s | %-*s | %s" % ("", 7 * runs + runs - 1 + 9, "gdrc/ucx, <= 0.7",
                          "gdrc/floor, <= 2 from n = 10000"))
print("%8s | %s %-8s | %s %s" % ("n", runhdr, "verdict", runhdr, "verdict"))
ns = sorted({e["n"] for r in res for e in r["lookup"]})
for n in ns:
    rows = [next((e for e in r["lookup"] if e["n"] == n), None)
            for r in res]
    ucx = [ratio(med(e, "random_hit_ns"), med(e, "ucx_random_hit_ns"))
           for e in rows]
    flr = [ratio(med(e, "random_hit_ns"), med(e, "floor_ns"))
           for e in rows]
    print("%8d | %s %-8s | %s %s" % (
        n, cells(ucx), verdict(ucx, lambda v: v <= 0.7), cells(flr),
        verdict(flr, lambda v: v <= 2.0) if n >= 10000 else "-"))

print()
print("%-36s %s %-8s %s" % ("", runhdr, "target", "verdict"))
rot = [med(r, "ratio_rotate16k_vs_ucx") for r in res]
print("%-36s %s %-8s %s" % ("rotating over 16384 ranges, gdrc/ucx",
                            cells(rot), "<= 1.0",
                            verdict(rot, lambda v: v <= 1.0)))
hot = [med(r, "ratio_hit_vs_ucx") for r in res]
print("%-36s %s %-8s %s" % ("one hot range, gdrc/ucx", cells(hot),
                            "<= 0.3", verdict(hot, lambda v: v <= 0.3)))
last = [max(r["lookup"], key=lambda e: e["n"]) if r["lookup"] else None
        for r in res]
nmax = max((e["n"] for e in last if e), default=0)
gb = [e["bytes_per_reg"] if e and e["bytes_per_reg"] >= 0 else None
      for e in last]
ub = [e["ucx_bytes_per_reg"] if e and e["ucx_bytes_per_reg"] >= 0 else None
      for e in last]
print("%-36s %s" % ("bytes/registration at n=%d, gdrc" % nmax,
                    cells(gb, "%7.0f")))
print("%-36s %s %-8s %s" % ("bytes/registration at n=%d, ucx" % nmax,
                            cells(ub, "%7.0f"), "<= ucx",
                            verdict([ratio(g, u) for g, u in zip(gb, ub)],
                                    lambda v: v <= 1.0)))
if res[0]["quick"]:
    print("(--quick: n up to 100000 and 10x fewer iterations; the issue's"
          " rows are for full runs)")
print("runs: %s/run-K.txt and .json" % out)
EOF
