#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# gpu-check.sh - on a machine with an NVIDIA GPU: build, run every test
# that does not need the VM lab (the GPU ones included: test_gpu,
# test_gpu_static, test_gpu_vmm_driver, the PyTorch tests), then the
# benchmark's GPU rows a few times, and leave the logs in one folder.
# What docs/benchmarks.md records comes from these logs.
#
#   usage: scripts/gpu-check.sh [OUTDIR] [BENCH_RUNS]
#          (default OUTDIR: ./gpu-check-out, BENCH_RUNS: 2)
# Needs CMake, a C compiler, the CUDA toolkit (for the GPU tests), cmocka,
# uthash and libibverbs headers (found through CMAKE_PREFIX_PATH).
# Prints a short summary; exits non-zero if the build or a test failed.
set -uo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac
out=${1:-gpu-check-out}
runs=${2:-2}
build=${GDRC_GPU_BUILD:-/tmp/gdrc-gpu-build}
mkdir -p "$out"

date -u | tee "$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
	2>&1 | tee -a "$out/summary.txt"
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	>"$out/build.txt" 2>&1 ||
   ! cmake --build "$build" -j"$(nproc)" >>"$out/build.txt" 2>&1; then
	tail -40 "$out/build.txt"
	echo "build failed" | tee -a "$out/summary.txt"
	exit 1
fi
(cd "$build" && ctest -LE "vm|kmod" -j4 --timeout 300 \
	--output-on-failure >"$out/ctest.txt" 2>&1)
rc=$?
grep -E "tests passed|\*\*\*Failed|Failed  |Not Run|Skipped" \
	"$out/ctest.txt" | tee -a "$out/summary.txt"
for i in $(seq 1 "$runs"); do
	"$build"/tests/bench/gdrc-bench --gpu-only \
		--json "$out/bench$i.json" >"$out/bench$i.txt" 2>&1 || rc=1
	grep -E "^g\. " "$out/bench$i.txt" >>"$out/summary.txt"
done
echo "gdrc-pingpong --local --mem cuda (usec per message):" >>"$out/summary.txt"
"$build"/examples/gdrc-pingpong --local --mem cuda -n 20 -r 5 -s 64K:64M \
	-m cache,pin-each -o "$out/pingpong-cuda.csv" \
	>"$out/pingpong-cuda.txt" 2>&1 || rc=1
cat "$out/pingpong-cuda.txt" >>"$out/summary.txt"
date -u | tee -a "$out/summary.txt"
exit $rc
