#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_clients_pair.sh: third-party programs, unmodified, that register
# memory on every transfer, run between the VM lab's two guests over
# soft-RoCE (vmlab.sh pair), plain and under libgdrcache-preload.so:
#
#   ucx    UCX's ucx_perftest at the UCP level (tag_lat, 64 KiB
#          messages, rendezvous from 16 KiB), UCX's registration cache
#          off (UCX_IB_REG_METHODS=direct): UCP registers the user's
#          buffer for every message.  ucx_perftest checks no data.
#   mpi    Open MPI over UCX (pml ucx, the same settings) running
#          mpi_pingpong (ours): every byte of every message checked,
#          and every 20 rounds both buffers unmapped and mapped anew at
#          the same addresses (a stale registration fails the check).
#          mpirun starts the second rank through tests/vm/pair-rsh.sh.
#   fabric libfabric's fi_pingpong over verbs;ofi_rxm (RDM), its MR
#          cache off, data checked (-c).  At 64 KiB rxm copies through
#          its own registered buffers, so this shows transparency, not
#          per-message registration: rxm's rendezvous (which registers
#          the user's buffer) does not work on soft-RoCE (docs/hooks.md).
#
# UCX on soft-RoCE needs UCX_IB_GID_INDEX=0 (its UD transport, which
# UCP's wireup needs, gets no reply over an IPv4-mapped GID) and
# UCX_IB_FORK_INIT=n (with ibv_fork_init in effect the preload passes
# registrations through; docs/hooks.md).  libfabric's rxm needs
# FI_UNIVERSE_SIZE=64: its default CQ is larger than rxe's 32,767.
#
# Checks: every run ends with 0 and its result line; under the preload
# each process served registrations from the cache (GDRC_STATS=1: hits
# for ucx and mpi, misses for fabric, no "still held at fini"), and in
# mpi each rank's unmaps invalidated its registrations.  Prints the
# time per message plain and preloaded and the fraction of
# registrations the cache served.
#
# Usage: run_clients_pair.sh PRELOAD_SO MPI_PINGPONG
# Exit: 0 on success; 77 when the VM lab or a client is unavailable;
# the lab's 123/124/125; else 1.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=../vm/runner.sh
. "$here/../vm/runner.sh"
out=$here/.out-pair
lib=${1:?usage: run_clients_pair.sh PRELOAD_SO MPI_PINGPONG}
mpp=${2:?usage: run_clients_pair.sh PRELOAD_SO MPI_PINGPONG}
for prog in ucx_perftest mpirun fi_pingpong; do
	command -v "$prog" >/dev/null ||
		{ echo "clients_pair: no $prog: skipped"; exit 77; }
done

vm_require clients_pair
vm_stage_preload "$out" "$mpp" "$lib" || exit 1
if [[ -n $asan ]]; then
	echo "clients_pair: ASan build: third-party programs are not run under ASan's runtime: skipped"
	exit 77
fi
rm -f "$out"/*.txt "$out"/done
n=${GDRC_CLIENTS_ITERS:-100}

# What both guests run: the settings, and run NAME CMD... (the output to
# $out/NAME.txt, its status appended).
cat >"$out/common.sh" <<EOF
out=$out
n=$n
pre="$pre"
p=$p
rsh=$runner_dir/pair-rsh.sh
rshd=$runner_dir/pair-rshd.sh
EOF
cat >>"$out/common.sh" <<'EOF'
export UCX_NET_DEVICES=rxe0:1 UCX_TLS=rc_verbs,ud_verbs UCX_IB_GID_INDEX=0
export UCX_IB_REG_METHODS=direct UCX_RNDV_THRESH=16k UCX_IB_FORK_INIT=n
export UCX_WARN_UNUSED_ENV_VARS=n
export FI_MR_CACHE_MAX_COUNT=0 FI_UNIVERSE_SIZE=64
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
stats="GDRC_STATS=1 GDRC_LOG_LEVEL=info"
run() {
	local name=$1
	shift
	timeout 120 "$@" >"$out/$name.txt" 2>&1
	echo "status $?" >>"$out/$name.txt"
}
# UCX's UD reaches the peer over the link-local GID, which rxe routes
# as IPv6: wait for eth0's link-local address (it comes seconds after
# the link, past duplicate address detection) and have the peer's
# neighbour entry (its address from the MAC the prologue's ping found),
# or ibv_create_ah times out.
ipv6_up() {
	local mac a b c d e f i
	for i in $(seq 100); do
		[ -n "$(ip -6 addr show dev eth0 scope link)" ] &&
			[ -z "$(ip -6 addr show dev eth0 tentative)" ] && break
		sleep 0.2
	done
	mac=$(ip neigh show "$GDRC_PEER" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1) }')
	IFS=: read -r a b c d e f <<<"$mac"
	a=$(printf %02x $((0x$a ^ 2)))
	/run/vmlab/busybox ping -6 -c 2 -w 10 "fe80::$a$b:${c}ff:fe$d:$e$f%eth0" >/dev/null
}
ipv6_up || echo "clients_pair: no IPv6 reply from the peer" >&2
# A client retries while its server is not listening yet.
run_client() {
	local name=$1 i
	for i in $(seq 60); do
		run "$@"
		grep -q "refused" "$out/$name.txt" || return 0
		sleep 2
	done
}
EOF
# A: the servers, and mpirun (rank 0 here, rank 1 in B).
cat >"$out/A.sh" <<'EOF'
. "$(dirname "$0")/common.sh"
run ucx-plain-server ucx_perftest -p 13340 -t tag_lat -s 65536 -n "$n" -w 5
run ucx-preload-server env LD_PRELOAD="$pre" $stats \
	ucx_perftest -p 13341 -t tag_lat -s 65536 -n "$n" -w 5
mpi="mpirun -np 2 --host 10.99.0.1,10.99.0.2 --mca plm_rsh_agent $rsh
	--mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include eth0
	--mca pml ucx -x UCX_NET_DEVICES -x UCX_TLS -x UCX_IB_GID_INDEX
	-x UCX_IB_REG_METHODS -x UCX_RNDV_THRESH -x UCX_IB_FORK_INIT
	-x UCX_WARN_UNUSED_ENV_VARS"
run mpi-plain $mpi "$p" -s 65536 -n "$n" -f 20
run mpi-preload $mpi -x LD_PRELOAD="$pre" -x GDRC_STATS=1 \
	-x GDRC_LOG_LEVEL=info "$p" -s 65536 -n "$n" -f 20
fi="fi_pingpong -p verbs;ofi_rxm -e rdm -c -S 65536 -I $n"
run fabric-plain-server $fi -B 9240
run fabric-preload-server env LD_PRELOAD="$pre" $stats $fi -B 9241
touch "$out/done"
EOF
# B: the clients, and the remote shell for mpirun until A is done.
cat >"$out/B.sh" <<'EOF'
. "$(dirname "$0")/common.sh"
/run/vmlab/busybox nc -ll -p 2222 -e "$rshd" &
rshd_pid=$!
run_client ucx-plain-client ucx_perftest "$GDRC_PEER" -p 13340 \
	-t tag_lat -s 65536 -n "$n" -w 5
run_client ucx-preload-client env LD_PRELOAD="$pre" $stats \
	ucx_perftest "$GDRC_PEER" -p 13341 -t tag_lat -s 65536 -n "$n" -w 5
fi="fi_pingpong -p verbs;ofi_rxm -e rdm -c -S 65536 -I $n"
run_client fabric-plain-client $fi -P 9240 "$GDRC_PEER"
run_client fabric-preload-client env LD_PRELOAD="$pre" $stats \
	$fi -P 9241 "$GDRC_PEER"
for _ in $(seq 300); do
	[ -e "$out/done" ] && break
	sleep 1
done
kill "$rshd_pid" 2>/dev/null
exit 0
EOF

rc=0
bash "$vmlab" pair --share "$repo" --timeout 900 -- \
	bash "$out/A.sh" -- bash "$out/B.sh" >"$out/lab.log" 2>&1 || rc=$?
if ((rc != 0)); then
	tail -n 30 "$out/lab.log"
	echo "clients_pair: lab exit status $rc"
	exit "$rc"
fi

fail() {
	echo "clients_pair: $*"
	rc=1
}
# The served fraction of one stats line: hits / (hits + misses).
served() {
	sed -n 's/.*"hits": \([0-9]*\), "misses": \([0-9]*\).*/\1 \2/p' |
		awk '{ printf "%s%d of %d (%.1f %%)", s, $1, $1 + $2,
		       100 * $1 / ($1 + $2); s = ", " }'
}
for f in "$out"/*-*.txt; do
	grep -qx "status 0" "$f" ||
		{ fail "$(basename "$f" .txt) failed:"; tail -n 15 "$f"; }
	grep -q "still held at fini" "$f" &&
		fail "$(basename "$f" .txt): a registration was held at fini"
done
for mode in plain preload; do
	# tag_lat's Final line: iterations, then the one-way latency's
	# median, average and overall (us).
	line=$(grep '^Final:' "$out/ucx-$mode-client.txt")
	[[ -n $line ]] || fail "ucx $mode: no result line"
	echo "clients_pair: ucx_perftest $mode: one-way latency median $(echo "$line" | awk '{ print $3 }') us"
	line=$(grep '^pingpong:' "$out/mpi-$mode.txt")
	[[ $line == *"every byte checked"* ]] || fail "mpi $mode: no result line"
	echo "clients_pair: Open MPI (UCX) $mode: ${line#pingpong: }"
	line=$(grep -E '^64k ' "$out/fabric-$mode-client.txt")
	[[ $line == *" $n "*"=$n "* ]] || fail "fabric $mode: did not exchange $n messages"
	echo "clients_pair: fi_pingpong (verbs;ofi_rxm) $mode: ${line:-no result line}"
done
for f in ucx-preload-server ucx-preload-client mpi-preload; do
	want=1
	[[ $f == mpi-* ]] && want=2
	got=$(grep -c '"hits": [1-9]' "$out/$f.txt")
	((got >= want)) ||
		fail "$f: $got processes of $want served hits from the cache"
	echo "clients_pair: $f served: $(grep -h '"misses"' "$out/$f.txt" | served)"
done
# Each rank unmapped its two buffers (n / 20 - 1) times: each unmap
# ends a registration.
got=$(grep -c '"inv_host_hook": [1-9]' "$out/mpi-preload.txt")
((got >= 2)) || fail "mpi-preload: $got ranks of 2 saw unmaps end registrations"
for f in fabric-preload-server fabric-preload-client; do
	grep -q '"misses": [1-9]' "$out/$f.txt" ||
		fail "$f: the preload served no registration"
done
exit $rc
