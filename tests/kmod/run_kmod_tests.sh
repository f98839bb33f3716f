#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run_kmod_tests.sh: builds gdrcache.ko (on the host, against the VM lab's
# guest kernel) and the test programs, then loads the module in a VM lab
# guest and runs them there.  Prints the guest's dmesg tail and fails if it
# holds a WARN, BUG or oops.
#
# Test programs (tests/kmod/*.c, built into tests/kmod/.out), in order:
#   test_kmod_sub                 subscriptions, the generation page, limits
#   test_kmod_pin --no-provider   PIN gives ENODEV (mock not loaded yet)
#   test_kmod_pin                 pin/unpin/query, revocation, errors
#   test_kmod_stress              races, kill -9, fd passing, ioctl fuzzer
#   test_kmod_quota               max_pinned_bytes_per_user (EDQUOT, per
#                                 uid, release by another process/uid)
#   test_kmod_pin --compiled-out  instead of the four above, without nv-p2p.h
#   extra programs given as arguments (e.g. test_kmod_chan, test_kmod_gpu;
#   test_stress_remap and test_uring_stale run with the module as their
#   only host source; test_uring_stale must run: its skip fails)
#
# GPU pinning: when NVIDIA's nv-p2p.h can be had (see nvp2p_include below),
# gdrcache.ko is built with it, and so is the test-only mock provider
# tests/kmod/mock_nvp2p.  In the guest, test_kmod_pin runs once before the
# mock is loaded (PIN gives ENODEV), then with it, followed by
# test_kmod_stress and test_kmod_quota.  Without the header the pin tests
# are skipped with a message (only the -EOPNOTSUPP answers of the
# compiled-out module are checked).
#
# The GPU-pin half's result goes to .out/gpu_status ("ran", or "skipped:
# why"), which ctest kmod_gpu_pin reports on its own.
#
# Exit: the tests' status; 77 when the VM lab is unavailable (see
# tests/vm/README.md); 123/124/125 are the lab's own (oops, timeout, lab
# failure).  Environment: GDRC_STRESS_SCALE=N runs test_kmod_stress's
# races and fuzzer N times as long (a few minutes at 10); CC (default cc);
# NV_P2P_INCLUDE, a folder
# holding nv-p2p.h (default: fetched, see nvp2p_include); GDRC_NV_P2P=off
# to build and test without it; GDRC_APT_DIR, the apt folder whose
# sources get contrib non-free (default /etc/apt; see apt_add_nonfree).
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

# Gives the Debian archive's entries in apt's sources the components
# contrib and non-free where they lack them (non-free-firmware left as
# it is; a second run changes nothing), in both of apt's formats:
# one-line "deb URI SUITE COMPONENTS..." in sources.list and *.list (what
# the installer and debootstrap write), and deb822 stanzas in *.sources
# (their Components line, where the stanza's URIs are Debian's).
# GDRC_APT_DIR (default /etc/apt) is the folder edited, for a test.
apt_add_nonfree() {
	local etc=${GDRC_APT_DIR:-/etc/apt} f tmp deb822
	tmp=$(mktemp) || return 1
	for f in "$etc/sources.list" "$etc"/sources.list.d/*.list \
		"$etc"/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		deb822=0
		[[ $f == *.sources ]] && deb822=1
		awk -v deb822=$deb822 '
		function comp(l) {
			sub(/[ \t]+$/, "", l)
			if (l !~ /[ \t]contrib([ \t]|$)/) l = l " contrib"
			if (l !~ /[ \t]non-free([ \t]|$)/) l = l " non-free"
			return l
		}
		function flush(i, l) {
			for (i = 1; i <= n; i++) {
				l = buf[i]
				if (deb && tolower(l) ~ /^components:/)
					l = comp(l)
				print l
			}
			n = deb = 0
		}
		!deb822 {
			l = $0
			if (l ~ /^[ \t]*deb(-src)?[ \t].*:\/\/[^ \t]*debian/)
				l = comp(l)
			print l
			next
		}
		/^[ \t]*$/ { flush(); print; next }
		{
			buf[++n] = $0
			if (tolower($0) ~ /^uris:.*:\/\/[^ \t]*debian/)
				deb = 1
		}
		END { flush() }' "$f" >"$tmp" || { rm -f "$tmp"; return 1; }
		# Rewritten in place (its owner and mode kept), only if changed.
		cmp -s "$tmp" "$f" || cat "$tmp" >"$f" || { rm -f "$tmp"; return 1; }
	done
	rm -f "$tmp"
}

# Prints a folder holding NVIDIA's nv-p2p.h, or fails with a message on
# stderr.  Order: $NV_P2P_INCLUDE; an earlier extraction under /tmp;
# /usr/src/nvidia-open-kernel.tar.xz of Debian's nvidia-open-kernel-source,
# installed first (root only) if missing, after adding "contrib non-free"
# to the Components of the Debian source entries when they lack them.
nvp2p_include() {
	local dir=/tmp/gdrc-nvp2p tarball=/usr/src/nvidia-open-kernel.tar.xz
	local hdr=modules/nvidia-open-kernel/nvidia f

	if [[ -n ${NV_P2P_INCLUDE:-} ]]; then
		if [[ -f $NV_P2P_INCLUDE/nv-p2p.h ]]; then
			echo "$NV_P2P_INCLUDE"
			return 0
		fi
		echo "NV_P2P_INCLUDE=$NV_P2P_INCLUDE has no nv-p2p.h" >&2
		return 1
	fi
	if [[ -f $dir/$hdr/nv-p2p.h ]]; then
		echo "$dir/$hdr"
		return 0
	fi
	if [[ ! -f $tarball ]]; then
		if ((EUID != 0)); then
			echo "nvidia-open-kernel-source missing and not root" >&2
			return 1
		fi
		apt_add_nonfree || return 1
		echo "+ apt-get install nvidia-open-kernel-source" >&2
		{ apt-get update -qq &&
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends nvidia-open-kernel-source
		} >/tmp/gdrc-nvp2p-apt.log 2>&1 || {
			echo "apt-get failed, see /tmp/gdrc-nvp2p-apt.log" >&2
			return 1
		}
	fi
	mkdir -p "$dir" &&
		tar -xJf "$tarball" -C "$dir" "$hdr/nv-p2p.h" >&2 &&
		[[ -f $dir/$hdr/nv-p2p.h ]] || {
		echo "no nv-p2p.h in $tarball" >&2
		return 1
	}
	echo "$dir/$hdr"
}

mkdir -p "$out"
rm -f "$out/gpu_status"
# kbuild SRC DST ARGS...: build the Kbuild module of SRC in DST, a copy of
# its sources (never in the source tree: two builds would race there).
kbuild() {
	local src=$1 dst=$2
	shift 2
	rm -rf "$dst" && mkdir -p "$dst" || return 1
	cmake -DSRC="$src" -DDST="$dst" -P "$repo/cmake/GdrcKbuildCopy.cmake" &&
		make -s -C "$dst" "$@" modules
}
nvinc=""
nvwhy="GDRC_NV_P2P=off"
if [[ ${GDRC_NV_P2P:-on} != off ]]; then
	nvinc=$(nvp2p_include 2>"$out/nvp2p_why") || nvinc=""
	nvwhy=$(tail -n 1 "$out/nvp2p_why")
fi
if [[ -n $nvinc ]]; then
	echo "+ kbuild kmod -> $out/kmod KVER=$kver NV_P2P_INCLUDE=$nvinc"
	kbuild "$repo/kmod" "$out/kmod" KVER="$kver" NV_P2P_INCLUDE="$nvinc" ||
		exit 1
	echo "+ kbuild mock_nvp2p -> $out/mock_nvp2p KVER=$kver NV_P2P_INCLUDE=$nvinc"
	kbuild "$here/mock_nvp2p" "$out/mock_nvp2p" KVER="$kver" \
		NV_P2P_INCLUDE="$nvinc" || exit 1
else
	echo "kmod: no nv-p2p.h: GPU pin tests skipped (module built without pinning)"
	echo "+ kbuild kmod -> $out/kmod KVER=$kver"
	kbuild "$repo/kmod" "$out/kmod" KVER="$kver" || exit 1
fi
for t in test_kmod_sub test_kmod_pin test_kmod_stress test_kmod_quota; do
	echo "+ ${CC:-cc} ... -o $out/$t"
	"${CC:-cc}" -std=gnu11 -Wall -Wextra -Werror -O2 -g -pthread \
		-o "$out/$t" "$here/$t.c" || exit 1
done
if [[ -n $nvinc ]]; then
	pin_cmd='
'"$out"'/test_kmod_pin --no-provider || rc=$?
insmod '"$out"'/mock_nvp2p/mock_nvp2p.ko || rc=1
'"$out"'/test_kmod_pin || rc=$?
GDRC_STRESS_SCALE='"${GDRC_STRESS_SCALE:-1}"' '"$out"'/test_kmod_stress || rc=$?
'"$out"'/test_kmod_quota || rc=$?'
	unload_mock='
rmmod mock_nvp2p || rc=1'
else
	pin_cmd='
'"$out"'/test_kmod_pin --compiled-out || rc=$?'
	unload_mock=''
fi

# Further test programs given as arguments (built by CMake, maybe outside
# the share) run after test_kmod_sub, with the glibc hooks off so that
# only the module can report frees.  Copied into the share first.  One
# that skips (77: test_kmod_gpu without the mock provider) is said, and
# does not turn what did run into a skip.
extra=""
for t in "$@"; do
	[ -n "$t" ] || continue # one CMake left out (no io_uring: "")
	cp "$t" "$out/" || exit 1
	case $t in
	*.so) continue ;; # a library a test loads from its own folder
	esac
	b=$(basename "$t")
	if [ "$b" = test_stress_remap ]; then
		# The remap stress with the module as the only host source
		# (GDRC_MEM_HOOKS=auto: with the module loaded, glibc is left
		# unpatched): no stale hit, and the source it ran on said.
		# Remaps are timed at their start, as the notifier sees them
		# (test_stress_remap.c, tick).
		extra="$extra
GDRC_STRESS_TICK=start $out/$b 3 > /tmp/stress.txt 2>&1; s=\$?; cat /tmp/stress.txt
if [ \$s -ne 0 ]; then rc=\$s; elif ! grep -q 'host source: gdrcache.ko' /tmp/stress.txt; then echo 'kmod: the stress did not run on the module'; rc=1; fi"
		continue
	fi
	if [ "$b" = test_uring_stale ]; then
		# No stale io_uring slot with the module as the host source
		# (GDRC_MEM_HOOKS=auto: with the module loaded, glibc is left
		# unpatched; GDRC_TEST_HOST_SOURCE=kmod checks it serves).  It
		# must run here: its skip (77) fails.
		extra="$extra
GDRC_CHECK=1 GDRC_MEM_HOOKS=auto GDRC_TEST_HOST_SOURCE=kmod $out/$b; s=\$?
if [ \$s -eq 77 ]; then echo 'kmod: $b skipped, counted as a failure'; rc=1; elif [ \$s -ne 0 ]; then rc=\$s; fi"
		continue
	fi
	extra="$extra
GDRC_MEM_HOOKS=none $out/$b; s=\$?
if [ \$s -eq 77 ]; then echo \"kmod: $b skipped\"; elif [ \$s -ne 0 ]; then rc=\$s; fi"
done
# Paths inside the share are the same absolute paths as on the host.
guest_cmd='
insmod '"$out"'/kmod/gdrcache.ko || exit 1
'"$out"'/test_kmod_sub
rc=$?'"$pin_cmd$extra"'
if ! rmmod gdrcache; then
	echo "kmod: rmmod gdrcache failed"
	rc=1
fi'"$unload_mock"'

echo "----- guest dmesg | tail -n 25 -----"
dmesg | tail -n 25
if dmesg | grep -E "WARNING:|BUG:|Oops|general protection|Call Trace"; then
	echo "kmod: the kernel log shows a WARN, BUG or oops"
	[ "$rc" -eq 0 ] && rc=1
fi
exit $rc'

# Two vCPUs, so that the mock's free callback truly runs concurrently with
# UNPIN and close in test_kmod_pin (CMake reserves PROCESSORS 2).
rc=0
bash "$vmlab" run --share "$repo" --timeout 300 --smp 2 -- sh -c "$guest_cmd" || rc=$?
echo "kmod: guest exit status $rc"
# What the GPU-pin part did, for ctest kmod_gpu_pin (gpu_pin_status.sh).
if ((rc == 0)) && [[ -n $nvinc ]]; then
	echo "ran" >"$out/gpu_status"
elif ((rc == 0)); then
	echo "skipped: no nv-p2p.h ($nvwhy); nvidia-open-kernel-source, in Debian's contrib non-free, provides it" \
		| tee "$out/gpu_status"
fi
exit "$rc"
