#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# torch_train.py twice, without and with LD_PRELOAD=PRELOAD_SO: both
# must complete and print the same numbers, bit for bit.  Exit 77 when
# torch or a GPU is missing (torch_train.py says so).
# Usage: run_torch_preload.sh PYTHON PRELOAD_SO [STEPS [DEVICES]]
py=${1:?usage: run_torch_preload.sh PYTHON PRELOAD_SO [STEPS [DEVICES]]}
so=${2:?usage: run_torch_preload.sh PYTHON PRELOAD_SO [STEPS [DEVICES]]}
shift 2
here=$(dirname "$0")
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$py" "$here/torch_train.py" "$@" > "$out/plain" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	cat "$out/plain"
	exit $rc
fi
LD_PRELOAD=$so GDRC_LOG_LEVEL=debug "$py" "$here/torch_train.py" "$@" \
	> "$out/preload" 2> "$out/preload.err" || {
	cat "$out/preload" "$out/preload.err"
	exit 1
}
grep "gdrc" "$out/preload.err" | sort | uniq -c
grep -q "cuda free hooks installed" "$out/preload.err" || {
	echo "torch_preload: the preload did not hook the CUDA driver"
	exit 1
}
if ! cmp -s "$out/plain" "$out/preload"; then
	echo "torch_preload: results differ with the preload"
	diff "$out/plain" "$out/preload" | head -n 20
	exit 1
fi
tail -n 2 "$out/preload"
echo "torch_preload: identical results with and without the preload"
