#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_stall.sh: a peer that stops mid-sweep must not hang gdrc-pingpong.
# The server (guest A) is stopped with SIGSTOP once messages flow; the
# client (guest B, --wc-timeout 5) must give up on its next completion
# with status 3 and a line naming what it waited for, well inside the
# lab's timeout.  (What the demo's retry rests on: scripts/demo.sh.)
#
# Usage: run_stall.sh PINGPONG LIBGDRCACHE_SO
# Exit: 0 when the client stopped so; 1 otherwise; 77 when the VM lab is
# unavailable.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
prog=${1:?usage: run_stall.sh PINGPONG LIBGDRCACHE_SO}
lib=${2:?usage: run_stall.sh PINGPONG LIBGDRCACHE_SO}

vm_begin pingpong_stall "$prog" "$lib"
run="LD_LIBRARY_PATH=$out $out/$(basename "$prog") -d rxe0"
# The server: messages flow once its first receive completes, which the
# client's first line ("prereg ...") follows; 20 s is far past that in
# the lab, and far short of the sweep's end.  Stopped, then killed once
# the client has had time to give up.
server="$run & pid=\$!; sleep 20; kill -STOP \$pid; echo server stopped;
	sleep 30; kill -KILL \$pid; wait \$pid; exit 0"
log=$out/pair.log
rc=0
bash "$vmlab" pair --share "$repo" --timeout 400 \
	-- sh -c "$server" \
	-- sh -c "$run -n 100000 -w 1 -s 4K:4K --wc-timeout 5 \$GDRC_PEER" \
	>"$log" 2>&1 || rc=$?
cat "$log"
if ((rc == 3)) &&
	grep -q 'gdrc-pingpong: client: no .* completion in 5 s (mode ' "$log"; then
	echo "stall: the client gave up with status 3"
	exit 0
fi
echo "stall: expected status 3 and the timeout line, got $rc" >&2
exit 1
