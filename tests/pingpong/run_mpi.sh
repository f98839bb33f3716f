#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_mpi.sh: gdrc-pingpong --mpi (built with MPI), two ranks started by
# mpirun in one VM lab guest (two vCPUs) on rxe0 over a dummy netdev:
# the MPI bootstrap in place of TCP.  Open MPI itself is kept to shared
# memory (btl self,vader), away from the RDMA device.
# Usage: run_mpi.sh PINGPONG LIBGDRCACHE_SO [OPTIONS...]
# Exit: the ranks' status (0: every message checked); 77 when the VM lab
# or mpirun is unavailable; the lab's 123/124/125.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
prog=${1:?usage: run_mpi.sh PINGPONG LIBGDRCACHE_SO [OPTIONS...]}
lib=${2:?usage: run_mpi.sh PINGPONG LIBGDRCACHE_SO [OPTIONS...]}
shift 2

command -v mpirun >/dev/null || { echo "pingpong_mpi: no mpirun: skipped"; exit 77; }
vm_begin pingpong_mpi "$prog" "$lib"
guest_cmd='
sh '"$repo"'/tests/vm/rxe-up.sh || exit 1
export LD_LIBRARY_PATH='"$out"' HOME=/tmp OMPI_MCA_btl=self,vader \
	OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_plm_rsh_agent=false
mpirun --allow-run-as-root --oversubscribe -np 2 \
	'"$out/$(basename "$prog")"' --mpi -d rxe0 '"$*"
rc=0
bash "$vmlab" run --share "$repo" --timeout 300 --smp 2 -- sh -c "$guest_cmd" || rc=$?
exit "$rc"
