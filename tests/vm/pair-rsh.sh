#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# pair-rsh.sh: the remote shell of a VM lab pair (vmlab.sh pair), for
# launchers that start processes on another host through ssh or rsh
# (Open MPI's --mca plm_rsh_agent).  The other guest runs
# pair-rshd.sh behind busybox nc on port GDRC_RSH_PORT (default 2222):
#
#     /run/vmlab/busybox nc -ll -p 2222 -e tests/vm/pair-rshd.sh &
#
# Usage, as ssh is called: pair-rsh.sh [-OPTION...] HOST COMMAND...
# The command's words are joined with spaces and run by the other
# guest's sh, as ssh runs them; its output (stdout and stderr) comes
# back on stdout until it ends.  The lab's two guests have no users,
# keys or network beyond each other: this is no more than a pipe.
# Exit: 255 when HOST cannot be reached, else 0.
while [[ ${1:-} == -* ]]; do
	shift
done
host=${1:?usage: pair-rsh.sh HOST COMMAND...}
shift
exec 3<>"/dev/tcp/$host/${GDRC_RSH_PORT:-2222}" || exit 255
printf '%s\n' "$*" >&3
cat <&3
