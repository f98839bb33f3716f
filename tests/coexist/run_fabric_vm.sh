#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_fabric_vm.sh: test_fabric_coexist in a VM lab guest with soft-RoCE
# up (libfabric's verbs provider, the only one of 1.17 with an MR cache,
# needs a device), in the orders given (default both, as ctest runs it:
# fabric-first, libfabric's memhooks patch glibc before gdrc_init;
# gdrc-first, after it).  An order "preload-ORDER" runs ORDER under
# LD_PRELOAD=$GDRC_PRELOAD_SO (libgdrcache-preload.so: its hooks go in
# before main, so in preload-fabric-first libfabric patches over them
# before gdrc_init, which must take them back).
#
# Usage: [GDRC_PRELOAD_SO=...] run_fabric_vm.sh TEST_FABRIC_COEXIST [ORDER...]
# Exit: 0 all passed; 77 the VM lab is unavailable; the lab's
# 123/124/125; else 1.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
prog=${1:?usage: run_fabric_vm.sh TEST_FABRIC_COEXIST [ORDER...]}
shift
orders=${*:-fabric-first gdrc-first}
out=$here/.out-fabric

vm_require fabric
vm_stage "$out" "$prog" "$(dirname "$prog")/../lib/libgdrcache.so.0" ||
	exit 1
pre=
case " $orders" in
*" preload-"*)
	vm_stage_preload "$out" "$prog" \
		"${GDRC_PRELOAD_SO:?an order preload-... needs GDRC_PRELOAD_SO}" ||
		exit 1 ;;
esac
rm -f "$out"/*.txt
guest_cmd='
set -u
sh '"$repo"'/tests/vm/rxe-up.sh || exit 1
for order in '"$orders"'; do
	case $order in
	preload-*) preload="'"$pre"'" ;;
	*) preload= ;;
	esac
	LD_PRELOAD=$preload LD_LIBRARY_PATH='"$out"' \
		'"$out/$(basename "$prog")"' ${order#preload-} \
		> "'"$out"'/$order.txt" 2>&1
	echo "$order: $?" >> "'"$out"'/status.txt"
done
exit 0'

vm_run fabric "$guest_cmd"
rc=0
for order in $orders; do
	echo "== $order"
	cat "$out/$order.txt"
	grep -qx "$order: 0" "$out/status.txt" || rc=1
done
cat "$out/status.txt"
exit $rc
