#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# gpu-check.sh - on a machine with an NVIDIA GPU: build, run every test
# that does not need the VM lab (the GPU ones included: test_gpu,
# test_gpu_static, test_gpu_vmm_driver, test_cufile_gpu, the PyTorch
# tests with torch_gds, gdrc-io --mem cuda's and the cuFile benchmark's
# short runs), then the benchmark's GPU rows a few times, the GPU
# ping-pong without a NIC, the cuFile benchmark, gdrc-io reading into GPU
# memory and the cuFile semantics probe, and leave the logs in one
# folder.  What docs/benchmarks.md records comes from these logs.
#
# cuFile registers a file handle only with a udev entry for the file's
# disk: where the machine has no /run/udev at all (a container), this
# writes one first for /, /tmp and the build folder
# (tests/gpu/udev_entry.sh, which says what it wrote; a real udev database
# is left alone).  Where the loader finds no libcufile.so.0, it points
# GDRC_CUFILE_LIBRARY at the CUDA toolkit's.
#
#   usage: scripts/gpu-check.sh [OUTDIR] [BENCH_RUNS]
#          (default OUTDIR: ./gpu-check-out, BENCH_RUNS: 2)
# Needs CMake, a C compiler, the CUDA toolkit (for the GPU tests and the
# probe), cmocka, uthash and libibverbs headers (found through
# CMAKE_PREFIX_PATH), liburing for gdrc-io.
# OUTDIR gets: summary.txt (what is printed), build.txt, udev.txt,
# ctest.txt, bench<i>.txt and .json, pingpong-cuda.txt and .csv,
# cufile-bench.txt and .json, io-cuda.txt and .csv,
# cufile-semantics.txt.  The summary's last line counts what failed:
# "... 0 failed" when the build, every test and every program passed;
# the exit status is then 0, else 1.
set -uo pipefail

case "${1:-}" in
-h | --help) # the comment above, as the usage text
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac
out=${1:-gpu-check-out}
runs=${2:-2}
build=${GDRC_GPU_BUILD:-/tmp/gdrc-gpu-build}
mkdir -p "$out" "$build"
sum=$out/summary.txt
failed=0   # tests and programs that failed
programs=0 # programs run after the tests

date -u | tee "$sum"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
	2>&1 | tee -a "$sum"

# cuFile's udev entry, before anything opens a file with cuFile.
sh tests/gpu/udev_entry.sh / /tmp "$build" 2>&1 | tee "$out/udev.txt" |
	tee -a "$sum"
# The library opens libcufile.so.0 by name: the toolkit's where the
# loader knows none.
if [[ -z ${GDRC_CUFILE_LIBRARY:-} ]] &&
	! ldconfig -p 2>/dev/null | grep -q 'libcufile\.so\.0 '; then
	for f in /usr/local/cuda/targets/*/lib/libcufile.so.0 \
		/usr/local/cuda-*/targets/*/lib/libcufile.so.0 \
		/usr/local/cuda*/lib64/libcufile.so.0; do
		if [[ -e $f ]]; then
			export GDRC_CUFILE_LIBRARY=$f
			break
		fi
	done
fi
echo "libcufile:" \
	"${GDRC_CUFILE_LIBRARY:-libcufile.so.0, as the loader finds it}" |
	tee -a "$sum"

if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	>"$out/build.txt" 2>&1 ||
   ! cmake --build "$build" -j"$(nproc)" >>"$out/build.txt" 2>&1; then
	tail -40 "$out/build.txt"
	echo "build failed" | tee -a "$sum"
	echo "gpu-check: the build failed; 1 failed" | tee -a "$sum"
	exit 1
fi
(cd "$build" && ctest -LE "vm|kmod" -j4 --timeout 300 \
	--output-on-failure >"$out/ctest.txt" 2>&1)
ctest_rc=$?
grep -E "tests passed|\*\*\*Failed|Failed  |Not Run|Skipped" \
	"$out/ctest.txt" | tee -a "$sum"
# "100% tests passed out of N" (newer CMake with nothing failed) or
# "P% tests passed, F tests failed out of N".
line=$(grep -E 'tests passed.* out of [0-9]+' "$out/ctest.txt" | tail -n 1)
if [[ -n $line ]]; then
	tests_run=${line##* }
	tests_failed=0
	if [[ $line =~ ([0-9]+)\ tests?\ failed ]]; then
		tests_failed=${BASH_REMATCH[1]}
	fi
	# A failure ctest did not count (a crash of ctest itself).
	if ((ctest_rc && !tests_failed)); then
		tests_failed=1
	fi
else
	echo "ctest printed no result line (see ctest.txt)" | tee -a "$sum"
	tests_failed=1
	tests_run=0
fi
tests_skipped=$(grep -c '(Skipped)' "$out/ctest.txt")
failed=$((failed + tests_failed))

# program NAME LOG COMMAND...: run it, its output into LOG, and count
# it; 77 is a skip, not a failure.  @return its status.
program() {
	local name=$1 log=$2 rc=0
	shift 2
	programs=$((programs + 1))
	"$@" >"$log" 2>&1 || rc=$?
	if ((rc == 77)); then
		echo "$name: skipped" | tee -a "$sum"
	elif ((rc != 0)); then
		echo "$name: FAILED ($rc)" | tee -a "$sum"
		failed=$((failed + 1))
	fi
	return $rc
}

for i in $(seq 1 "$runs"); do
	program "gdrc-bench $i" "$out/bench$i.txt" \
		"$build"/tests/bench/gdrc-bench --gpu-only \
		--json "$out/bench$i.json"
	grep -E "^g\. " "$out/bench$i.txt" >>"$sum"
done
echo "gdrc-pingpong --local --mem cuda (usec per message):" >>"$sum"
program gdrc-pingpong "$out/pingpong-cuda.txt" \
	"$build"/examples/gdrc-pingpong --local --mem cuda -n 20 -r 5 \
	-s 64K:64M -m cache,pin-each -o "$out/pingpong-cuda.csv"
cat "$out/pingpong-cuda.txt" >>"$sum"

# cuFile: registering per I/O against the cache, and 1 MiB reads.
echo "gdrc-cufile-bench (usec):" | tee -a "$sum"
if program gdrc-cufile-bench "$out/cufile-bench.txt" \
	"$build"/tests/bench/gdrc-cufile-bench \
	--json "$out/cufile-bench.json"; then
	sed -n '/^a\. registering/,$p' "$out/cufile-bench.txt" | tee -a "$sum"
else
	tail -n 5 "$out/cufile-bench.txt" | tee -a "$sum"
fi

# gdrc-io into GPU memory: cuFileRead per read registered four ways.
if [[ -x $build/examples/gdrc-io ]]; then
	echo "gdrc-io --mem cuda on /tmp (usec per read):" | tee -a "$sum"
	if program "gdrc-io --mem cuda" "$out/io-cuda.txt" \
		"$build"/examples/gdrc-io --mem cuda -f /tmp -s 64K:16M \
		-n 10 -r 3 --workload 200 -o "$out/io-cuda.csv"; then
		grep -E '^ *[0-9]+[KM]:|^workload|^data:' "$out/io-cuda.txt" |
			tee -a "$sum"
	else
		tail -n 5 "$out/io-cuda.txt" | tee -a "$sum"
	fi
else
	echo "gdrc-io --mem cuda: not built (no liburing)" | tee -a "$sum"
fi

# What libcufile answers (tests/gpu/cufile_semantics.c): a probe, printed,
# not judged.
nvcc=$(command -v nvcc || true)
[[ -n $nvcc ]] || nvcc=$(ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [[ -n $nvcc ]]; then
	stubs=$(dirname "$nvcc")/../lib64/stubs
	if "$nvcc" -O2 tests/gpu/cufile_semantics.c -lcufile -L"$stubs" \
		-lcuda -o "$build/cufile_semantics" \
		>"$out/cufile-semantics.txt" 2>&1; then
		"$build/cufile_semantics" >>"$out/cufile-semantics.txt" 2>&1
		echo "cufile_semantics (a probe): status $?, output in" \
			"cufile-semantics.txt" | tee -a "$sum"
	else
		echo "cufile_semantics: not built (cufile-semantics.txt)" |
			tee -a "$sum"
	fi
else
	echo "cufile_semantics: not built (no nvcc)" | tee -a "$sum"
fi

date -u | tee -a "$sum"
echo "gpu-check: $tests_run tests ($tests_skipped skipped) and $programs" \
	"programs run; $failed failed" | tee -a "$sum"
((failed == 0))
