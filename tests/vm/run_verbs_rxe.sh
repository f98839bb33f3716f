#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_verbs_rxe.sh: test_verbs_rxe (the verbs backend, real libibverbs)
# in a VM lab guest, on rxe0 over a dummy netdev.
# Usage: run_verbs_rxe.sh TEST_VERBS_RXE FAKE_LIBCUDA_SO
# Exit: the test's status; 77 when the VM lab is unavailable; the lab's
# 123/124/125.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=runner.sh
. "$here/runner.sh"
prog=${1:?usage: run_verbs_rxe.sh TEST_VERBS_RXE FAKE_LIBCUDA_SO}
fake=${2:?usage: run_verbs_rxe.sh TEST_VERBS_RXE FAKE_LIBCUDA_SO}

vm_require verbs_rxe
# The share is the repository; the test finds the fake beside itself.
out=$here/.out
vm_stage "$out" "$prog" "$fake" || exit 1
t=$out/$(basename "$prog")
guest_cmd='
sh '"$repo"'/tests/vm/rxe-up.sh || exit 1
'"$t"' '"$out/$(basename "$fake")"
rc=0
bash "$vmlab" run --share "$repo" --timeout 300 -- sh -c "$guest_cmd" || rc=$?
exit "$rc"
