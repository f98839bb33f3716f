#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_pair.sh: gdrc-pingpong between two VM lab guests joined by soft-RoCE
# (tests/vm, "pair"): the server in guest A, the client in guest B.
#
# Usage: run_pair.sh PINGPONG LIBGDRCACHE_SO CSV [CLIENT OPTIONS...]
#   PINGPONG, LIBGDRCACHE_SO  the built program and the library it loads
#                             (copied under its soname)
#   CSV                       where the client's table lands (mode,bytes,
#                             usec,mbps), on the host
# Prints the client's table.  Exit: the client's status (0: every message
# checked); 77 when the VM lab is unavailable; the lab's 123/124/125.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
prog=${1:?usage: run_pair.sh PINGPONG LIBGDRCACHE_SO CSV [OPTIONS...]}
lib=${2:?usage: run_pair.sh PINGPONG LIBGDRCACHE_SO CSV [OPTIONS...]}
csv=${3:?usage: run_pair.sh PINGPONG LIBGDRCACHE_SO CSV [OPTIONS...]}
shift 3

# The share is the repository: the guests see these copies.
vm_begin pingpong "$prog" "$lib"
run="LD_LIBRARY_PATH=$out $out/$(basename "$prog") -d rxe0"
rc=0
bash "$vmlab" pair --share "$repo" --timeout 600 \
	-- sh -c "$run" \
	-- sh -c "$run -o $out/result.csv $* \$GDRC_PEER" || rc=$?
if [[ -f $out/result.csv ]]; then
	cp "$out/result.csv" "$csv" || rc=1
fi
exit "$rc"
