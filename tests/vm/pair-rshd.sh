#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# pair-rshd.sh: the other end of pair-rsh.sh, run by busybox nc -e for
# each connection: one line, a command for sh.
read -r line || exit 1
exec sh -c "$line" 2>&1
