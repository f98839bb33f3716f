#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# linked_user (a program linking libgdrcache.so) alone, then under
# LD_PRELOAD=PRELOAD_SO: both must pass.  In a sanitizer build the
# sanitizer's runtime goes first in LD_PRELOAD, as it must.
# Usage: run_linked.sh LINKED_USER PRELOAD_SO
set -u
prog=${1:?usage: run_linked.sh LINKED_USER PRELOAD_SO}
so=${2:?usage: run_linked.sh LINKED_USER PRELOAD_SO}
asan=$(ldd "$prog" 2>/dev/null | awk '/libasan/ && !n++ { print $3 }')
"$prog" || exit 1
LD_PRELOAD="${asan:+$asan }$so" "$prog" --preloaded
