#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_kmod_tests.sh: builds gdrcache.ko (on the host, against the VM lab's
# guest kernel) and test_kmod_sub, then loads the module in a VM lab guest
# and runs the test there.  Prints the guest's dmesg tail and fails if it
# holds a WARN, BUG or oops.
#
# Exit: the test's status; 77 when the VM lab is unavailable (see
# tests/vm/README.md); 123/124/125 are the lab's own (oops, timeout, lab
# failure).  Environment: CC (default cc).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)
vmlab=$repo/tests/vm/vmlab.sh
out=$here/.out

rc=0
kver=$(bash "$vmlab" deps) || rc=$?
if ((rc == 77)); then
	echo "kmod: VM lab unavailable: skipped"
	exit 77
elif ((rc != 0)) || [[ -z $kver ]]; then
	echo "kmod: vmlab.sh deps failed ($rc): skipped"
	exit 77
fi
if [[ ! -d /lib/modules/$kver/build ]]; then
	echo "kmod: no headers for $kver: skipped"
	exit 77
fi

echo "+ make -C $repo/kmod KVER=$kver"
make -s -C "$repo/kmod" KVER="$kver" modules || exit 1
mkdir -p "$out"
echo "+ ${CC:-cc} ... -o $out/test_kmod_sub"
"${CC:-cc}" -std=gnu11 -Wall -Wextra -Werror -O2 -g -pthread \
	-o "$out/test_kmod_sub" "$here/test_kmod_sub.c" || exit 1

# Further test programs given as arguments (built by CMake, maybe outside
# the share) run after test_kmod_sub, with the glibc hooks off so that
# only the module can report frees.  Copied into the share first.
extra=""
for t in "$@"; do
	cp "$t" "$out/" || exit 1
	extra="$extra
GDRC_MEM_HOOKS=none $out/$(basename "$t") || rc=\$?"
done
# Paths inside the share are the same absolute paths as on the host.
guest_cmd='
insmod '"$repo"'/kmod/gdrcache.ko || exit 1
'"$out"'/test_kmod_sub
rc=$?'"$extra"'
rmmod gdrcache || rc=${rc:-1}
echo "----- guest dmesg | tail -n 25 -----"
dmesg | tail -n 25
if dmesg | grep -E "WARNING:|BUG:|Oops|general protection|Call Trace"; then
	echo "kmod: the kernel log shows a WARN, BUG or oops"
	[ "$rc" -eq 0 ] && rc=1
fi
exit $rc'

rc=0
bash "$vmlab" run --share "$repo" --timeout 300 -- sh -c "$guest_cmd" || rc=$?
echo "kmod: guest exit status $rc"
exit "$rc"
