#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: what the cache buys an RDMA ping-pong.  Builds
# gdrc-pingpong (examples/) and runs it between two hosts in its three
# registration modes (prereg: registered once; cache: gdrc_mr_get/put per
# message; pin-each: ibv_reg_mr/ibv_dereg_mr per message) over a size
# sweep, every message checked, then prints the table with the ratios
# and plots time per round trip against size (PNG).
#
# Where: on a machine with an RDMA device (not soft-RoCE), on it, server
# and client as two local processes (--mem cuda too when nvidia-smi sees a
# GPU); otherwise in the VM lab (tests/vm): two qemu guests joined by a
# network on loopback, soft-RoCE (rxe) on each.  The VM's CPU is
# emulated: compare the modes, not the absolute times.
#
# Usage: scripts/demo.sh [ITERS] (default 10: per size, the three modes
# take turns 3 times, ITERS round trips each, and the best turn counts)
# Output: build-demo/
set -euo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac

top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/build-demo
iters=${1:-10}
rounds=3
sizes=4K:4M

bash "$top/scripts/deps.sh"
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j"$(nproc)" --target gdrc-pingpong >/dev/null
pp=$dir/examples/gdrc-pingpong
lib=$(readlink -f "$dir/lib/libgdrcache.so.0")

# A real RDMA device: one that is not soft-RoCE or soft-iWARP.
real_dev=""
if command -v ibv_devices >/dev/null; then
	real_dev=$(ibv_devices 2>/dev/null |
		awk 'NR > 2 && $1 !~ /^(rxe|siw)/ { print $1; exit }' || true)
fi

run_local() { # MEM: server and client on this machine's device
	local mem=$1 csv=$2
	echo "== gdrc-pingpong on $real_dev, --mem $mem, two local processes"
	"$pp" -d "$real_dev" --mem "$mem" >"$dir/server.log" 2>&1 &
	local spid=$!
	"$pp" -d "$real_dev" --mem "$mem" -n "$iters" -r "$rounds" \
		-s "$sizes" -o "$csv" 127.0.0.1
	wait "$spid"
}

csvs=()
if [[ -n $real_dev ]]; then
	run_local host "$dir/pingpong-host.csv"
	csvs+=("$dir/pingpong-host.csv")
	if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
		run_local cuda "$dir/pingpong-cuda.csv"
		csvs+=("$dir/pingpong-cuda.csv")
	fi
else
	echo "== no RDMA device here: two VM lab guests with soft-RoCE (booting)"
	bash "$top/tests/pingpong/run_pair.sh" "$pp" "$lib" \
		"$dir/pingpong-host.csv" -n "$iters" -r "$rounds" -w 2 -s "$sizes"
	csvs+=("$dir/pingpong-host.csv")
fi

for csv in "${csvs[@]}"; do
	echo
	echo "== $(basename "$csv" .csv): microseconds per round trip"
	awk -F, 'NR > 1 { t[$1, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; s[++n] = $2 } }
	END {
		printf "%10s %11s %11s %11s %13s %14s\n", "bytes", "prereg",
		       "cache", "pin-each", "cache/prereg", "pin-each/cache"
		for (i = 1; i <= n; i++) {
			b = s[i]; p = t["prereg", b]; c = t["cache", b]; e = t["pin-each", b]
			printf "%10d %11.1f %11.1f %11.1f %13.3f %14.2f\n", b, p, c, e,
			       c / p, e / c
		}
	}' "$csv"
	png=${csv%.csv}.png
	gnuplot <<-GP
		set terminal png size 900,600
		set output "$png"
		set datafile separator ","
		set logscale xy
		set xlabel "message size (bytes)"
		set ylabel "microseconds per round trip"
		set title "gdrc-pingpong: registration modes ($(basename "$csv" .csv))"
		set key left top
		plot for [m in "prereg cache pin-each"] "< grep '^".m.",' $csv" \
			using 2:3 with linespoints title m
	GP
	echo "plot: $png"
done
