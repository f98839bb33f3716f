#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_preload_vm.sh: libgdrcache-preload.so under an unmodified verbs
# program (verbs_per_msg.c), against real libibverbs and soft-RoCE in a
# VM lab guest (tests/vm).  Runs, on rxe0 over a dummy netdev:
#   1. verbs_per_msg realloc, with the preload: a freed and reallocated
#      block must get the data written into it (no stale registration);
#   2. verbs_per_msg loop without and with the preload (8 MiB registered
#      and 4 KiB written per message): every message checked; the
#      preload's counters (GDRC_STATS=1) must show the messages'
#      registrations served as hits.
# Prints both loops' time per message (figures, not checked here: they
# go in docs/benchmarks.md).
#
# Usage: run_preload_vm.sh VERBS_PER_MSG LIBGDRCACHE_PRELOAD_SO
# Exit: 0 on success; 77 when the VM lab is unavailable; the lab's
# 123/124/125 (oops, timeout, lab failure); else 1.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
out=$here/.out
prog=${1:?usage: run_preload_vm.sh VERBS_PER_MSG PRELOAD_SO}
lib=${2:?usage: run_preload_vm.sh VERBS_PER_MSG PRELOAD_SO}

vm_require preload
# The share is the repository: the build products are copied into it.
vm_stage_preload "$out" "$prog" "$lib" || exit 1
iters=${GDRC_PRELOAD_ITERS:-300}
size=$((8 << 20)) # registered per message; 4 KiB of it written

guest_cmd='
set -u
sh '"$repo"'/tests/vm/rxe-up.sh || exit 1
rc=0
# realloc with the memory event source HOOKS (auto: glibc patched;
# uffd: userfaultfd, nothing patched).
realloc() {
	echo "== realloc, preloaded, GDRC_MEM_HOOKS=$1"
	GDRC_MEM_HOOKS=$1 LD_PRELOAD="'"$pre"'" GDRC_STATS=1 \
		GDRC_LOG_LEVEL=info '"$p"' -d rxe0 realloc \
		> /tmp/realloc.txt 2>&1 || rc=1
	cat /tmp/realloc.txt
	if [ -n "'"$asan"'" ]; then
		# ASan'"'"'s allocator keeps freed blocks in quarantine: no
		# unmap, no reuse of the address; only the data checks mean
		# something.
		echo "preload: ASan build: the reuse checks are skipped"
		return
	fi
	grep -q "inv_host_hook\": [1-9]" /tmp/realloc.txt ||
		{ echo "preload: the free was not seen ($1)"; rc=1; }
	grep -q "the freed block.s address" /tmp/realloc.txt ||
		{ echo "preload: the block did not come back at its address ($1)"; rc=1; }
	if [ "$1" = uffd ]; then
		grep -q "uffd_events\": [1-9]" /tmp/realloc.txt ||
			{ echo "preload: userfaultfd reported nothing"; rc=1; }
	fi
}
realloc auto
realloc uffd
echo "== loop, plain"
'"$p"' -d rxe0 -n '"$iters"' -s '"$size"' -w 4096 loop || rc=1
echo "== loop, preloaded"
LD_PRELOAD="'"$pre"'" GDRC_STATS=1 GDRC_LOG_LEVEL=info \
	'"$p"' -d rxe0 -n '"$iters"' -s '"$size"' -w 4096 loop \
	> /tmp/loop.txt 2>&1 || rc=1
cat /tmp/loop.txt
hits=$(sed -n "s/.*\"hits\": \([0-9]*\).*/\1/p" /tmp/loop.txt | awk "!n++")
echo "preload: loop hits ${hits:-none} of '"$iters"' messages"
[ "${hits:-0}" -ge $(('"$iters"' - 1)) ] ||
	{ echo "preload: the messages were not served from the cache"; rc=1; }
exit $rc'

rc=0
bash "$vmlab" run --share "$repo" --timeout 300 -- sh -c "$guest_cmd" || rc=$?
echo "preload: guest exit status $rc"
exit "$rc"
