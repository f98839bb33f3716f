#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_preload_errors_vm.sh: the preload is transparent on errors.  Runs
# verbs_errors.c (every error path of issue 17's list, one line each)
# plain and under LD_PRELOAD=libgdrcache-preload.so, on soft-RoCE in a VM
# lab guest (tests/vm), each of its modes (all, dereg-twice, fork-init,
# and fork-safe: the fork cases under RDMAV_FORK_SAFE=1) in a process of
# its own, whose end (exit status or signal)
# is printed after its lines.  The two outputs must be identical but for
# the differences pinned in verbs_errors.diff (what `diff plain preload`
# prints, exactly), each of which docs/hooks.md explains.
#
# Usage: run_preload_errors_vm.sh VERBS_ERRORS LIBGDRCACHE_PRELOAD_SO
# Exit: 0 on success; 77 when the VM lab is unavailable; the lab's
# 123/124/125 (oops, timeout, lab failure); else 1.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
out=$here/.out-errors
prog=${1:?usage: run_preload_errors_vm.sh VERBS_ERRORS PRELOAD_SO}
lib=${2:?usage: run_preload_errors_vm.sh VERBS_ERRORS PRELOAD_SO}

vm_require preload_errors
vm_stage_preload "$out" "$prog" "$lib" || exit 1
rm -f "$out"/*.txt

guest_cmd='
set -u
sh '"$repo"'/tests/vm/rxe-up.sh || exit 1
rc=0
# How a mode ended: 0, or "failed" (a signal, or an ASan build'"'"'s report
# and exit status: the same either way).
ended() { if [ "$1" = 0 ]; then echo "$mode: ended 0"; else echo "$mode: ended failed"; fi; }
for mode in all dereg-twice fork-init fork-safe; do
	env=""
	[ $mode = fork-safe ] && env=RDMAV_FORK_SAFE=1
	env $env '"$p"' -d rxe0 $mode >> "'"$out"'/plain.txt"
	ended $? >> "'"$out"'/plain.txt"
	env $env LD_PRELOAD="'"$pre"'" GDRC_LOG_LEVEL=error \
		'"$p"' -d rxe0 $mode >> "'"$out"'/preload.txt"
	ended $? >> "'"$out"'/preload.txt"
done
exit $rc'

rc=0
bash "$vmlab" run --share "$repo" --timeout 300 -- sh -c "$guest_cmd" || rc=$?
if ((rc != 0)); then
	echo "preload_errors: guest exit status $rc"
	exit "$rc"
fi
for f in plain preload; do
	echo "== $f"
	cat "$out/$f.txt"
done
# The modes that only print must have run to their end, both ways.
for f in plain preload; do
	for mode in all fork-init fork-safe; do
		if ! grep -qx "$mode: ended 0" "$out/$f.txt"; then
			echo "preload_errors: $f run of $mode did not end with 0"
			exit 1
		fi
	done
done
diff "$out/plain.txt" "$out/preload.txt" >"$out/diff.txt"
echo "== diff plain preload"
cat "$out/diff.txt"
if ! cmp -s "$out/diff.txt" "$here/verbs_errors.diff"; then
	echo "preload_errors: the differences are not the pinned ones" \
		"(tests/preload/verbs_errors.diff):"
	diff "$here/verbs_errors.diff" "$out/diff.txt"
	exit 1
fi
echo "preload_errors: plain and preloaded alike but for the pinned differences"
