#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# vmlab.sh: the project's VM lab.  Boots Debian's own kernel (from /boot, not
# the host's kernel) under qemu with TCG (software emulation: no KVM, no
# device, no module loading on the host) over the host's root filesystem,
# shared read-only through 9p, so that tests can load kernel modules
# (rdma_rxe soft-RoCE, the project's own gdrcache.ko) and run user-space
# programs against them, on a machine that has neither RDMA hardware nor the
# right to load modules.
#
# How a guest runs a command: a cached busybox initramfs loads the virtio/9p
# modules, mounts the host's / read-only at /newroot, sets up /proc, /sys,
# /dev, tmpfs on /tmp and /run, mounts the share (a host folder, writable)
# at its own absolute path, and runs the command in a chroot.  The command's
# output goes to the serial console between marker lines; the host parses
# the console log and exits with the command's status.  The command comes in
# a second, per-run cpio archive appended to the cached one (the kernel
# unpacks concatenated archives), so nothing has to be quoted on the kernel
# command line.
#
# Usage:
#   vmlab.sh deps
#       Installs the Debian packages the lab needs when missing, and prints
#       the guest kernel version (alone on stdout; messages go to stderr).
#   vmlab.sh run [--share DIR] [--timeout S] [--mem M] [--smp N]
#                [-e NAME=VALUE]... -- CMD [ARG...]
#       Runs CMD (as root) in one guest.  DIR (default: the current folder)
#       is writable in the guest at the same path; the guest starts in the
#       current folder when it exists there.  /lib/modules is the host's, so
#       modprobe works for the guest kernel's modules, and insmod for .ko
#       files in the share.  Only /tmp, /run, /dev/shm and DIR are writable.
#   vmlab.sh pair [--share DIR] [--timeout S] [--mem M] [-e NAME=VALUE]...
#                 -- SERVER_CMD... -- CLIENT_CMD...
#       Boots two guests, A and B, joined by a qemu socket network (a
#       point-to-point UDP link on two loopback ports): eth0 is
#       10.99.0.1/24 in A and 10.99.0.2/24 in B, with soft-RoCE device
#       rxe0 on it.  B waits until A answers ping, then
#       SERVER_CMD runs in A and CLIENT_CMD in B, with GDRC_PEER set to the
#       other guest's address.  Commands cannot contain a lone "--"; wrap
#       them in sh -c '...'.  SERVER_CMD may start a moment after CLIENT_CMD:
#       a client should retry its connection for a few seconds.
#   vmlab.sh selftest
#       Runs deps, then checks the lab end to end; closes with
#       "vmlab: N passed, M failed".
#
# Environment:
#   GDRC_VMLAB=off        skip: every subcommand exits 77
#   GDRC_VMLAB_DIR        cache and work folder (default /tmp/gdrc-vmlab);
#                         the lab writes nowhere else but the share
#   GDRC_VMLAB_KERNEL     guest kernel version (default: the newest
#                         /boot/vmlinuz-VER that has /lib/modules/VER)
#   GDRC_VMLAB_KEEP=1     keep each run's folder (console log) after success
#   GDRC_VMLAB_VERBOSE=1  copy the guests' consoles to stderr as they boot
#   GDRC_VMLAB_PROGRESS=1 pair: while the guests boot, a line every 10 s on
#                         stderr; then the client's (B's) output there as
#                         it comes (it is printed again at the end)
#   GDRC_VMLAB_BZIMAGE=1  boot /boot/vmlinuz as it is, not the cached ELF
#                         vmlinux decompressed from it (2.5 s slower a boot)
#
# Exit codes:
#   0..122  the command's own status (pair: A's if non-zero, else B's)
#   77      skipped: the lab cannot run here (GDRC_VMLAB=off, packages
#           missing and not installable, no guest kernel); the reason is
#           printed
#   123     the guest kernel died while the command ran (panic, or an oops:
#           guests boot with panic_on_oops=1)
#   124     timeout
#   125     lab failure: qemu missing, boot failure, setup inside the guest
#           failed (the step and the last 30 console lines are printed)
#   2       usage error
set -euo pipefail

VMLAB_SELF=$(readlink -f "${BASH_SOURCE[0]}")
VMLAB_DIR=${GDRC_VMLAB_DIR:-/tmp/gdrc-vmlab}
# Bumped whenever the guest side (init script, module list) changes, so a
# cached initramfs built by an older vmlab.sh is never reused.
VMLAB_INITRD_REV=3
# Modules the initramfs loads itself (their dependencies are resolved from
# modules.dep): PCI virtio transport and the 9p filesystem over virtio.
# Everything else is modprobed from the host root once it is mounted.
VMLAB_BOOT_MODULES=(virtio_pci 9pnet_virtio 9p)
VMLAB_PACKAGES=(qemu-system-x86 linux-image-amd64 linux-headers-amd64
	busybox-static cpio kmod rdma-core ibverbs-providers ibverbs-utils
	libibverbs-dev iproute2 make)
# 9p message size: the 8 KiB default makes every read of the root slow.
VMLAB_MSIZE=262144
VMLAB_GUEST_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# qemu runs under timeout(1) in a process group of its own, so an
# interrupted vmlab.sh (Ctrl-C, ctest's timeout) must stop its guests itself.
VMLAB_PIDS=" "
vmlab_cleanup() {
	local p
	for p in $VMLAB_PIDS; do
		kill "$p" 2>/dev/null || true
	done
	return 0
}
trap vmlab_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

vmlab_log() { printf 'vmlab: %s\n' "$*" >&2; }
vmlab_die() { # vmlab_die CODE MESSAGE
	local code=$1
	shift
	vmlab_log "error: $*"
	exit "$code"
}
vmlab_skip() {
	printf 'vmlab: SKIPPED: %s\n' "$*" >&2
	exit 77
}

# Single-quotes a word for a POSIX shell: both the guest's busybox ash
# (which reads the per-run configuration) and bash understand it.
vmlab_shquote() {
	local s=${1//\'/\'\\\'\'}
	printf "'%s'" "$s"
}

vmlab_check_enabled() {
	case ${GDRC_VMLAB:-on} in
	off | OFF | 0 | no | false) vmlab_skip "GDRC_VMLAB=${GDRC_VMLAB} in the environment" ;;
	esac
}

# The guest kernel: GDRC_VMLAB_KERNEL, or the newest /boot/vmlinuz-VER whose
# modules are installed (a vmlinuz without /lib/modules/VER could not load
# the 9p modules the boot needs).
vmlab_kernel_version() {
	local f v best=
	if [[ -n ${GDRC_VMLAB_KERNEL:-} ]]; then
		[[ -r /boot/vmlinuz-$GDRC_VMLAB_KERNEL && -d /lib/modules/$GDRC_VMLAB_KERNEL ]] ||
			return 1
		printf '%s\n' "$GDRC_VMLAB_KERNEL"
		return 0
	fi
	for f in /boot/vmlinuz-*; do
		[[ -e $f ]] || continue
		v=${f#/boot/vmlinuz-}
		[[ -f /lib/modules/$v/modules.dep ]] || continue
		best+="$v"$'\n'
	done
	[[ -n $best ]] || return 1
	printf '%s' "$best" | sort -V | tail -n 1
}

vmlab_missing_packages() {
	local p st
	for p in "${VMLAB_PACKAGES[@]}"; do
		st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
		[[ $st == ii* ]] || printf '%s\n' "$p"
	done
}

# Installs what is missing.  Returns 77 (with the reason printed) when the
# lab cannot be made to work here, so selftest can report a skip.
vmlab_deps() {
	local missing ver
	command -v dpkg-query >/dev/null || {
		vmlab_log "not a Debian system (no dpkg-query)"
		return 77
	}
	[[ $(dpkg --print-architecture) == amd64 ]] || {
		vmlab_log "host architecture is not amd64"
		return 77
	}
	mkdir -p "$VMLAB_DIR"
	missing=$(vmlab_missing_packages | tr '\n' ' ')
	if [[ -n ${missing// /} ]]; then
		if [[ $(id -u) != 0 ]]; then
			vmlab_log "missing packages: $missing(not root: cannot install)"
			return 77
		fi
		vmlab_log "installing: $missing"
		# One installer at a time among concurrent vmlab runs; apt's own
		# lock is waited on too rather than failing at once.
		if ! (
			flock 9
			export DEBIAN_FRONTEND=noninteractive
			# A host with no kernel in /boot does not boot from there (a
			# container, a Firecracker VM): the initrd the kernel package
			# would generate, twice, is never used, and costs 35 s of a
			# 48 s install.  A host that boots from /boot keeps it.
			if ! compgen -G '/boot/vmlinuz-*' >/dev/null; then
				export INITRD=No
			fi
			# The package lists may be stale or absent on a fresh machine.
			apt-get update -q >"$VMLAB_DIR/apt.log" 2>&1 || true
			# shellcheck disable=SC2086
			apt-get install -y -q --no-install-recommends \
				-o DPkg::Lock::Timeout=300 $missing >>"$VMLAB_DIR/apt.log" 2>&1
		) 9>"$VMLAB_DIR/deps.lock"; then
			tail -n 20 "$VMLAB_DIR/apt.log" >&2 || true
			vmlab_log "apt-get could not install: $missing(log: $VMLAB_DIR/apt.log)"
			return 77
		fi
		missing=$(vmlab_missing_packages | tr '\n' ' ')
		if [[ -n ${missing// /} ]]; then
			vmlab_log "still missing after apt-get: $missing"
			return 77
		fi
	fi
	if ! ver=$(vmlab_kernel_version); then
		vmlab_log "no guest kernel: no /boot/vmlinuz-VER with /lib/modules/VER"
		return 77
	fi
	vmlab_log "guest kernel $ver (/boot/vmlinuz-$ver); host kernel $(uname -r)"
	printf '%s\n' "$ver"
}

# Checks what a boot needs; a lab failure (125) when something is missing,
# since `deps` would have installed it.
vmlab_require() {
	local t
	for t in qemu-system-x86_64 cpio timeout flock ss; do
		command -v "$t" >/dev/null ||
			vmlab_die 125 "$t not found: run 'vmlab.sh deps' first"
	done
	[[ -x /bin/busybox ]] || vmlab_die 125 "/bin/busybox not found (package busybox-static)"
	# A dynamic busybox (package busybox) would not run in the initramfs.
	if ldd /bin/busybox >/dev/null 2>&1; then
		vmlab_die 125 "/bin/busybox is dynamically linked: install busybox-static"
	fi
	VMLAB_KVER=$(vmlab_kernel_version) ||
		vmlab_die 125 "no guest kernel (/boot/vmlinuz-VER with /lib/modules/VER): run 'vmlab.sh deps'"
	[[ -r /boot/vmlinuz-$VMLAB_KVER ]] ||
		vmlab_die 125 "/boot/vmlinuz-$VMLAB_KVER is not readable"
}

# Prints, one a line, the .ko paths (relative to /lib/modules/VER) to load
# for the given module names, dependencies first.  Modules built into the
# kernel are left out.
vmlab_module_order() {
	local kver=$1
	shift
	local -A dep=() seen=()
	local line path name out=()
	while IFS= read -r line; do
		path=${line%%:*}
		name=${path##*/}
		name=${name%%.ko*}
		dep[${name//-/_}]=$line
	done <"/lib/modules/$kver/modules.dep"
	# Depth-first, dependencies before the module itself.
	vmlab__visit() {
		local n=${1//-/_} entry p d
		[[ -n ${seen[$n]:-} ]] && return 0
		seen[$n]=1
		entry=${dep[$n]:-}
		if [[ -z $entry ]]; then
			if grep -qE "/${n//_/[_-]}\.ko" "/lib/modules/$kver/modules.builtin" 2>/dev/null; then
				return 0
			fi
			vmlab_log "module $n: not in modules.dep of $kver"
			return 1
		fi
		p=${entry%%:*}
		for d in ${entry#*:}; do
			d=${d##*/}
			vmlab__visit "${d%%.ko*}" || return 1
		done
		out+=("$p")
	}
	for name in "$@"; do
		vmlab__visit "$name" || return 1
	done
	printf '%s\n' "${out[@]}"
}

# The guest's /init (busybox ash, PID 1).  The per-run archive adds
# /vmlab/conf, /vmlab/cmd.sh and, for pair, /vmlab/prologue.sh.
vmlab_init_script() {
	cat <<'EOF'
#!/bin/busybox sh
# vmlab guest init, written by tests/vm/vmlab.sh.
/bin/busybox mkdir -p /dev /proc /sys /newroot /bin
/bin/busybox mount -t devtmpfs dev /dev
# Nothing in the guest reads from the console: a test must never wait for
# input.
exec </dev/null >/dev/console 2>&1
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
vmlab_fail() {
	echo "@@VMLAB:FAIL $*@@"
	sync
	poweroff -f
	sleep 10
}
. /vmlab/conf
while read -r m; do
	insmod "/lib/vmlab-modules/$m" || vmlab_fail "setup: insmod $m"
done </lib/vmlab-modules/order
mount -t 9p -o "trans=virtio,version=9p2000.L,ro,msize=$VMLAB_MSIZE,cache=loose" \
	root /newroot || vmlab_fail "setup: mount of the host root over 9p (tag root)"
R=/newroot
mount -t proc proc $R/proc || vmlab_fail "setup: mount $R/proc"
mount -t sysfs sys $R/sys || vmlab_fail "setup: mount $R/sys"
mount -t devtmpfs dev $R/dev || vmlab_fail "setup: mount $R/dev"
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts || vmlab_fail "setup: mount $R/dev/pts"
mount -t tmpfs -o mode=1777 shm $R/dev/shm || vmlab_fail "setup: mount $R/dev/shm"
mount -t tmpfs -o mode=1777 tmp $R/tmp || vmlab_fail "setup: mount $R/tmp"
mount -t tmpfs -o mode=755 run $R/run || vmlab_fail "setup: mount $R/run"
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null || true
if [ -n "$VMLAB_SHARE" ]; then
	# The share's path exists in the host root, or (under /tmp or /run)
	# is made in the tmpfs just mounted over it.
	mkdir -p "$R$VMLAB_SHARE" 2>/dev/null || true
	mount -t 9p -o "trans=virtio,version=9p2000.L,msize=$VMLAB_MSIZE" \
		share "$R$VMLAB_SHARE" || vmlab_fail "setup: mount of the share $VMLAB_SHARE (tag share)"
fi
# The kernel's own module autoloading (request_module: rdma_rxe asks for
# crc32 this way) runs /proc/sys/kernel/modprobe resolved in this
# initramfs, not in the chroot, where no modprobe and no /lib/modules are.
# Point it at a helper that runs the host's modprobe in the chroot.
printf '#!/bin/busybox sh\nexec /bin/busybox chroot /newroot /sbin/modprobe "$@"\n' \
	>/bin/vmlab-modprobe
chmod 755 /bin/vmlab-modprobe
echo /bin/vmlab-modprobe >/proc/sys/kernel/modprobe
mkdir -p $R/run/vmlab
cp /vmlab/* /bin/busybox $R/run/vmlab/ || vmlab_fail "setup: copy to $R/run/vmlab"
ip link set lo up
hostname "vmlab-$VMLAB_ROLE"
# Kernel messages stay off the console while commands run, so they do not
# interleave with the output (dmesg still has them; an oops forces its
# way through anyway).
echo 1 >/proc/sys/kernel/printk
if [ -f /vmlab/prologue.sh ]; then
	echo "@@VMLAB:PROLOGUE@@"
	chroot $R /bin/bash /run/vmlab/prologue.sh || vmlab_fail "prologue (network and rxe setup)"
fi
read -r up _ </proc/uptime
echo "@@VMLAB:BEGIN uptime=$up@@"
chroot $R /bin/bash /run/vmlab/cmd.sh
rc=$?
read -r up _ </proc/uptime
sync
echo
echo "@@VMLAB:END rc=$rc uptime=$up@@"
if [ "$VMLAB_ROLE" != run ]; then
	# A pair guest stays up, answering its peer, until the host stops
	# both: powering off as soon as its own command ends could leave the
	# peer waiting for it.  Writes to the share are already on the host
	# (the share is mounted without a cache).
	while :; do sleep 3600; done
fi
[ -n "$VMLAB_SHARE" ] && umount "$R$VMLAB_SHARE" 2>/dev/null
poweroff -f
sleep 10
EOF
}

# Builds (once per kernel, busybox and vmlab revision) the base initramfs:
# /init, a static busybox and the boot modules, decompressed (busybox
# insmod reads plain .ko files only).  Prints its path.
vmlab_initrd() {
	local kver=$1 key img stage m src dst n=0 order
	mkdir -p "$VMLAB_DIR/initrd"
	key=$({
		echo "rev $VMLAB_INITRD_REV $kver msize $VMLAB_MSIZE"
		vmlab_init_script
		printf '%s\n' "${VMLAB_BOOT_MODULES[@]}"
		stat -c '%s %Y' /bin/busybox "/lib/modules/$kver/modules.dep"
	} | sha256sum | cut -c1-16)
	img=$VMLAB_DIR/initrd/$kver-$key.cpio
	if [[ -s $img ]]; then
		printf '%s\n' "$img"
		return 0
	fi
	(
		# Concurrent runs (ctest -j) build it once.
		flock 9
		[[ -s $img ]] && exit 0
		order=$(vmlab_module_order "$kver" "${VMLAB_BOOT_MODULES[@]}") ||
			vmlab_die 125 "cannot resolve the boot modules of $kver"
		stage=$(mktemp -d "$VMLAB_DIR/initrd/stage.XXXXXX")
		trap 'rm -rf "$stage"' EXIT
		mkdir -p "$stage/bin" "$stage/lib/vmlab-modules" "$stage/dev" \
			"$stage/proc" "$stage/sys" "$stage/newroot" "$stage/vmlab"
		cp /bin/busybox "$stage/bin/busybox"
		vmlab_init_script >"$stage/init"
		chmod 755 "$stage/init"
		while IFS= read -r m; do
			src=/lib/modules/$kver/$m
			n=$((n + 1))
			dst=$(printf '%02d-%s' "$n" "${m##*/}")
			case $m in
			*.ko.xz) dst=${dst%.xz} && xz -dc "$src" >"$stage/lib/vmlab-modules/$dst" ;;
			*.ko.zst) dst=${dst%.zst} && zstd -qdc "$src" >"$stage/lib/vmlab-modules/$dst" ;;
			*.ko.gz) dst=${dst%.gz} && gzip -dc "$src" >"$stage/lib/vmlab-modules/$dst" ;;
			*) cp "$src" "$stage/lib/vmlab-modules/$dst" ;;
			esac
			echo "$dst" >>"$stage/lib/vmlab-modules/order"
		done <<<"$order"
		(cd "$stage" && find . | LC_ALL=C sort |
			cpio -o -H newc --owner=0:0 --quiet) >"$img.tmp"
		mv "$img.tmp" "$img"
		# Older images (another kernel, an older vmlab.sh) are not needed.
		find "$VMLAB_DIR/initrd" -maxdepth 1 -name '*.cpio' ! -name "${img##*/}" \
			-mmin +60 -delete 2>/dev/null || true
		vmlab_log "built initramfs $img ($(tr '\n' ' ' <"$stage/lib/vmlab-modules/order"))"
	) 9>"$VMLAB_DIR/initrd/lock" >&2
	[[ -s $img ]] || vmlab_die 125 "initramfs build failed"
	printf '%s\n' "$img"
}

# The kernel image qemu boots.  Debian's vmlinuz is a bzImage whose
# payload (xz on Debian 12) the guest would decompress under TCG on every
# boot, about 2.5 s; its ELF vmlinux has a PVH entry note (CONFIG_PVH), and
# qemu boots such an ELF directly.  So the payload is decompressed once,
# here, and cached; without a usable one (another compression, no PVH
# note, GDRC_VMLAB_BZIMAGE=1) the bzImage is booted as it is.  Prints the
# path to boot.
vmlab_kernel_image() {
	local kver=$1 vmlinuz=/boot/vmlinuz-$1 key img off magic cat
	if [[ ${GDRC_VMLAB_BZIMAGE:-0} == 1 ]] || ! command -v readelf >/dev/null; then
		printf '%s\n' "$vmlinuz"
		return 0
	fi
	mkdir -p "$VMLAB_DIR/kernel"
	key=$(stat -c '%s-%Y' "$vmlinuz")
	img=$VMLAB_DIR/kernel/vmlinux-$kver-$key
	if [[ -s $img ]]; then
		printf '%s\n' "$img"
		return 0
	fi
	(
		flock 9
		[[ -s $img ]] && exit 0
		# The first compressed-stream magic in the file is the payload's.
		for magic in 'xz \xfd\x37\x7a\x58\x5a\x00' 'zstd \x28\xb5\x2f\xfd' \
			'gzip \x1f\x8b\x08'; do
			off=$(LC_ALL=C grep -obUaP "${magic#* }" "$vmlinuz" | awk -F: '!n++ { print $1 }')
			[[ -n $off ]] || continue
			case ${magic%% *} in
			xz) cat='xz -dc --single-stream' ;;
			zstd) cat='zstd -qdc' ;;
			gzip) cat='gzip -dc' ;;
			esac
			# Trailing bytes after the stream make gzip and zstd complain:
			# the ELF check below is what decides.
			tail -c +$((off + 1)) "$vmlinuz" | $cat >"$img.tmp" 2>/dev/null || true
			if [[ $(head -c 4 "$img.tmp" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]] &&
				readelf -n "$img.tmp" 2>/dev/null | grep -c '(0x00000012)' >/dev/null; then
				mv "$img.tmp" "$img"
				find "$VMLAB_DIR/kernel" -maxdepth 1 -name 'vmlinux-*' ! -name "${img##*/}" \
					-mmin +60 -delete 2>/dev/null || true
				vmlab_log "cached the ELF vmlinux of $kver for PVH boot: $img"
				exit 0
			fi
		done
		rm -f "$img.tmp"
	) 9>"$VMLAB_DIR/kernel/lock" >&2
	if [[ -s $img ]]; then
		printf '%s\n' "$img"
	else
		vmlab_log "no PVH-bootable vmlinux in $vmlinuz: booting the bzImage (slower)"
		printf '%s\n' "$vmlinuz"
	fi
}

# Writes a guest's per-run files into the folder $1/guest and packs them
# into $1/initrd after the base image.
#   vmlab_guest_files RUNDIR ROLE SHARE CWD PROLOGUE_FILE ENVLIST -- CMD...
vmlab_guest_files() {
	local rdir=$1 role=$2 share=$3 cwd=$4 prologue=$5 envlist=$6 base=$7 a kv
	shift 8
	mkdir -p "$rdir/guest/vmlab"
	{
		echo "VMLAB_ROLE=$(vmlab_shquote "$role")"
		echo "VMLAB_SHARE=$(vmlab_shquote "$share")"
		echo "VMLAB_MSIZE=$VMLAB_MSIZE"
	} >"$rdir/guest/vmlab/conf"
	# The command's environment is built from nothing: the host's is not
	# carried over (it would name host-only paths), except -e NAME=VALUE.
	{
		echo '#!/bin/bash'
		echo "export PATH=$VMLAB_GUEST_PATH HOME=/root LANG=C.UTF-8 TERM=dumb"
		echo "export GDRC_VMLAB_GUEST=$(vmlab_shquote "$role")"
		while IFS= read -r kv; do
			[[ -n $kv ]] && echo "export $(vmlab_shquote "$kv")"
		done <<<"$envlist"
		echo "cd $(vmlab_shquote "$cwd") 2>/dev/null || cd $(vmlab_shquote "${share:-/}") || cd /"
		printf 'exec'
		for a in "$@"; do printf ' %s' "$(vmlab_shquote "$a")"; done
		printf '\n'
	} >"$rdir/guest/vmlab/cmd.sh"
	if [[ -n $prologue ]]; then
		cp "$prologue" "$rdir/guest/vmlab/prologue.sh"
	fi
	(cd "$rdir/guest" && find . | LC_ALL=C sort |
		cpio -o -H newc --owner=0:0 --quiet) >"$rdir/extra.cpio"
	cat "$base" "$rdir/extra.cpio" >"$rdir/initrd"
}

# Starts qemu for one guest in the background; its pid goes to $rdir/pid.
#   vmlab_qemu_start RUNDIR TIMEOUT MEM SMP SHARE [qemu args...]
vmlab_qemu_start() {
	local rdir=$1 tmo=$2 mem=$3 smp=$4 share=$5
	shift 5
	# shellcheck disable=SC2054 # commas inside qemu option values
	local args=(
		-nodefaults -no-user-config -no-reboot
		-machine pc -accel tcg,thread=multi -cpu max -m "$mem" -smp "$smp"
		-display none -monitor none
		-kernel "$VMLAB_KIMG" -initrd "$rdir/initrd"
		-append "console=ttyS0 quiet panic=-1 panic_on_oops=1 edd=off rdinit=/init"
		-virtfs "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap"
	)
	# qemu option values escape a comma by doubling it.
	[[ -n $share ]] &&
		args+=(-virtfs "local,path=${share//,/,,},mount_tag=share,security_model=none,multidevs=remap")
	: >"$rdir/console.log"
	# timeout(1) gives 124 when the limit is reached; -k makes sure a qemu
	# that ignores SIGTERM still goes.
	if [[ ${GDRC_VMLAB_VERBOSE:-0} == 1 ]]; then
		# The console goes to qemu's stdout as it comes, and to the log.
		timeout -k 10 "$tmo" qemu-system-x86_64 "${args[@]}" \
			-chardev "stdio,id=con0,signal=off,logfile=${rdir//,/,,}/console.log" \
			-serial chardev:con0 "$@" </dev/null 2>"$rdir/qemu.log" \
			> >(sed -u "s/^/[${rdir##*/}] /" >&2) &
	else
		timeout -k 10 "$tmo" qemu-system-x86_64 "${args[@]}" \
			-serial "file:${rdir//,/,,}/console.log" "$@" \
			</dev/null >"$rdir/qemu.log" 2>&1 &
	fi
	echo $! >"$rdir/pid"
	VMLAB_PIDS+="$! "
}

# Waits for a guest's qemu (so it must run in the shell that started it,
# not in a $(...) subshell) and classifies what happened.  Writes
# $rdir/out (the command's output) and $rdir/result: the command's status,
# 123 (died), 124 (timeout) or 125 (lab failure).
vmlab_qemu_result() {
	local rdir=$1 qrc=0 rc pid
	pid=$(cat "$rdir/pid")
	wait "$pid" || qrc=$?
	VMLAB_PIDS=${VMLAB_PIDS//" $pid "/ }
	tr -d '\r' <"$rdir/console.log" >"$rdir/console.txt" || true
	awk '
		/@@VMLAB:END rc=[0-9]+/ { inside = 0; next }
		inside { print }
		/@@VMLAB:BEGIN/ { inside = 1 }
	' "$rdir/console.txt" >"$rdir/out.raw"
	# Drop the empty line that init prints to put the end marker on a
	# line of its own.
	if [[ -s $rdir/out.raw && -z $(tail -n 1 "$rdir/out.raw") ]]; then
		sed '$d' "$rdir/out.raw" >"$rdir/out"
	else
		cp "$rdir/out.raw" "$rdir/out"
	fi
	rc=$(sed -n 's/.*@@VMLAB:END rc=\([0-9]*\).*/\1/p' "$rdir/console.txt" | tail -n 1)
	if [[ -n $rc ]]; then
		:
	elif [[ $qrc == 124 || $qrc == 137 ]]; then
		rc=124
	elif grep -q '@@VMLAB:FAIL' "$rdir/console.txt"; then
		rc=125
	elif grep -q '@@VMLAB:BEGIN' "$rdir/console.txt"; then
		rc=123
	else
		rc=125
	fi
	echo "$qrc" >"$rdir/qemu.rc"
	echo "$rc" >"$rdir/result"
}

# Explains a result that is not the command's own, loudly.
vmlab_explain() {
	local rdir=$1 rc=$2 label=$3 what
	case $rc in
	123) what="the guest kernel died while the command ran (panic or oops)" ;;
	124) what="timed out" ;;
	125)
		what=$(sed -n 's/.*@@VMLAB:FAIL \(.*\)@@.*/\1/p' "$rdir/console.txt" | tail -n 1)
		if [[ -n $what ]]; then
			what="guest step failed: $what"
		elif [[ $(cat "$rdir/qemu.rc") != 0 ]]; then
			what="qemu exited with status $(cat "$rdir/qemu.rc") before the command started"
		else
			what="the guest never reached the command (boot failure)"
		fi
		;;
	*) return 0 ;;
	esac
	vmlab_log "$label: $what"
	if [[ -s $rdir/qemu.log ]]; then
		vmlab_log "$label: qemu said:"
		sed 's/^/    /' "$rdir/qemu.log" >&2
	fi
	vmlab_log "$label: last 30 console lines ($rdir/console.txt):"
	tail -n 30 "$rdir/console.txt" | sed 's/^/    /' >&2
}

vmlab_new_rundir() {
	mkdir -p "$VMLAB_DIR/runs"
	# Run folders kept after failures do not pile up for ever: a day at
	# most, and the newest 40.
	find "$VMLAB_DIR/runs" -mindepth 1 -maxdepth 1 -mmin +1440 \
		-exec rm -rf {} + 2>/dev/null || true
	find "$VMLAB_DIR/runs" -mindepth 1 -maxdepth 1 -printf '%T@ %p\n' 2>/dev/null |
		sort -rn | tail -n +41 | cut -d' ' -f2- | xargs -r rm -rf
	mktemp -d "$VMLAB_DIR/runs/$1.XXXXXX"
}

vmlab_share_path() {
	local d
	d=$(cd "$1" 2>/dev/null && pwd -P) || vmlab_die 2 "share $1: no such folder"
	case $d in
	/ | /proc | /proc/* | /sys | /sys/* | /dev | /dev/*)
		vmlab_die 2 "share $d: not a folder the guest can mount over" ;;
	esac
	printf '%s\n' "$d"
}

vmlab_usage() {
	sed -n '/^# Usage:/,/^# Exit codes:/p' "$VMLAB_SELF" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

vmlab_cmd_run() {
	local share=$PWD tmo=300 mem=1G smp=1 envlist='' rdir base rc t0
	while (($#)); do
		case $1 in
		--share) share=$2 && shift 2 ;;
		--timeout) tmo=$2 && shift 2 ;;
		--mem) mem=$2 && shift 2 ;;
		--smp) smp=$2 && shift 2 ;;
		-e) envlist+="$2"$'\n' && shift 2 ;;
		--) shift && break ;;
		-*) vmlab_usage ;;
		*) break ;;
		esac
	done
	(($#)) || vmlab_usage
	vmlab_check_enabled
	vmlab_require
	share=$(vmlab_share_path "$share")
	base=$(vmlab_initrd "$VMLAB_KVER")
	VMLAB_KIMG=$(vmlab_kernel_image "$VMLAB_KVER")
	rdir=$(vmlab_new_rundir run)
	vmlab_guest_files "$rdir" run "$share" "$PWD" "" "$envlist" "$base" -- "$@"
	t0=$SECONDS
	vmlab_qemu_start "$rdir" "$tmo" "$mem" "$smp" "$share"
	vmlab_qemu_result "$rdir"
	rc=$(cat "$rdir/result")
	cat "$rdir/out"
	vmlab_explain "$rdir" "$rc" "run"
	vmlab_log "run: exit $rc after $((SECONDS - t0)) s (guest $VMLAB_KVER$(vmlab_uptimes "$rdir"))"
	vmlab_finish_rundir "$rdir" "$rc"
	return "$rc"
}

# "; command began at Xs, ended at Ys of guest uptime", for the cost notes.
vmlab_uptimes() {
	local b e
	b=$(sed -n 's/.*@@VMLAB:BEGIN uptime=\([0-9.]*\)@@.*/\1/p' "$1/console.txt" | tail -n 1)
	e=$(sed -n 's/.*@@VMLAB:END rc=[0-9]* uptime=\([0-9.]*\)@@.*/\1/p' "$1/console.txt" | tail -n 1)
	[[ -n $b ]] && printf '; command started at %ss of guest uptime' "$b"
	[[ -n $e ]] && printf ', ended at %ss' "$e"
	return 0
}

vmlab_finish_rundir() {
	if [[ $2 == 0 && ${GDRC_VMLAB_KEEP:-0} != 1 ]]; then
		rm -rf "$1"
	else
		vmlab_log "console log kept: $1/console.txt"
	fi
}

# Guest-side network and soft-RoCE setup for pair, run in the chroot
# before the command.  $1: own address, $2: peer's, $3: role (A or B).
vmlab_pair_prologue() {
	cat <<EOF
#!/bin/bash
set -euo pipefail
export PATH=$VMLAB_GUEST_PATH
me=$1 peer=$2 role=$3
EOF
	cat <<'EOF'
modprobe -a virtio_net rdma_rxe ib_uverbs
for _ in $(seq 100); do [[ -e /sys/class/net/eth0 ]] && break; sleep 0.1; done
[[ -e /sys/class/net/eth0 ]] || { echo "vmlab prologue: no eth0"; exit 1; }
ip addr add "$me/24" dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0
# Neither command starts before both guests' networks are up.
ok=
for _ in $(seq 120); do
	if /run/vmlab/busybox ping -c 1 -W 1 "$peer" >/dev/null 2>&1; then
		ok=1 && break
	fi
done
[[ -n $ok ]] || { echo "vmlab prologue: $peer does not answer ping"; exit 1; }
echo "vmlab prologue: $role $me up, rxe0 on eth0, peer $peer"
EOF
}

# A pair guest is done when its command has ended or its qemu has exited.
vmlab_pair_done() {
	grep -q '@@VMLAB:END rc=' "$1/console.log" || ! kill -0 "$2" 2>/dev/null
}
vmlab_pair_ok() {
	grep -q '@@VMLAB:END rc=0 ' "$1/console.log"
}

# GDRC_VMLAB_PROGRESS: prints to stderr the lines of B's command output
# (RDIR) that have not been shown yet, only whole lines; before the
# command starts, a line every 10 s.  VMLAB_SHOWN counts what was shown.
VMLAB_SHOWN=0
VMLAB_BOOT_SAID=0
vmlab_pair_progress() {
	local log=$1/console.log t=$2 i n partial=''
	local -a got=()
	[[ -n $(tail -c 1 "$log" 2>/dev/null) ]] && partial=1
	mapfile -t got < <(tr -d '\r' <"$log" | awk '
		inside && /@@VMLAB:END/ { print "@@end"; exit }
		inside { print }
		/@@VMLAB:BEGIN/ { inside = 1; print "@@begin" }')
	n=${#got[@]}
	if ((n == 0)); then
		if ((t >= VMLAB_BOOT_SAID + 10)); then
			VMLAB_BOOT_SAID=$t
			echo "vmlab: pair: the guests are booting (${t} s)" >&2
		fi
		return 0
	fi
	# A line still being written is shown once it is whole.
	[[ -n $partial && ${got[n - 1]} != @@end ]] && n=$((n - 1))
	for ((i = VMLAB_SHOWN; i < n; i++)); do
		case ${got[i]} in
		@@begin) echo "vmlab: pair: up after ${t} s; the client's output:" >&2 ;;
		@@end) ;;
		*) printf '  %s\n' "${got[i]}" >&2 ;;
		esac
	done
	((n > VMLAB_SHOWN)) && VMLAB_SHOWN=$n
	return 0
}

vmlab_free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if [[ -z $(ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null) ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

vmlab_cmd_pair() {
	local share=$PWD tmo=300 mem=1G envlist='' base t0 port try
	local -a scmd=() ccmd=()
	while (($#)); do
		case $1 in
		--share) share=$2 && shift 2 ;;
		--timeout) tmo=$2 && shift 2 ;;
		--mem) mem=$2 && shift 2 ;;
		-e) envlist+="$2"$'\n' && shift 2 ;;
		--) shift && break ;;
		*) vmlab_usage ;;
		esac
	done
	while (($#)) && [[ $1 != -- ]]; do scmd+=("$1") && shift; done
	(($#)) && shift
	ccmd=("$@")
	((${#scmd[@]} && ${#ccmd[@]})) || vmlab_usage
	vmlab_check_enabled
	vmlab_require
	share=$(vmlab_share_path "$share")
	base=$(vmlab_initrd "$VMLAB_KVER")
	VMLAB_KIMG=$(vmlab_kernel_image "$VMLAB_KVER")
	local ra rb
	ra=$(vmlab_new_rundir pairA)
	rb=$(vmlab_new_rundir pairB)
	vmlab_pair_prologue 10.99.0.1 10.99.0.2 A >"$ra/prologue.sh"
	vmlab_pair_prologue 10.99.0.2 10.99.0.1 B >"$rb/prologue.sh"
	vmlab_guest_files "$ra" A "$share" "$PWD" "$ra/prologue.sh" \
		"${envlist}GDRC_PEER=10.99.0.2" "$base" -- "${scmd[@]}"
	vmlab_guest_files "$rb" B "$share" "$PWD" "$rb/prologue.sh" \
		"${envlist}GDRC_PEER=10.99.0.1" "$base" -- "${ccmd[@]}"
	t0=$SECONDS
	# A point-to-point UDP link on loopback (qemu's socket netdev with
	# udp=/localaddr=): each guest sends datagrams to the other's port.
	# A TCP stream (listen=/connect=) was tried first: frames sat ~20 ms
	# in it each way (Nagle against delayed ACKs), 44 ms a round trip.
	# A port taken between the check and qemu's bind fails that qemu at
	# once: retry with new ports.
	local porta portb
	for try in 1 2 3 4 5; do
		porta=$(vmlab_free_port) || vmlab_die 125 "no free loopback port"
		portb=$(vmlab_free_port) || vmlab_die 125 "no free loopback port"
		[[ $porta != "$portb" ]] || continue
		vmlab_qemu_start "$ra" "$tmo" "$mem" 1 "$share" \
			-netdev "socket,id=n0,udp=127.0.0.1:$portb,localaddr=127.0.0.1:$porta" \
			-device "virtio-net-pci,netdev=n0,mac=52:54:00:99:00:01"
		vmlab_qemu_start "$rb" "$tmo" "$mem" 1 "$share" \
			-netdev "socket,id=n0,udp=127.0.0.1:$porta,localaddr=127.0.0.1:$portb" \
			-device "virtio-net-pci,netdev=n0,mac=52:54:00:99:00:02"
		sleep 0.5
		if kill -0 "$(cat "$ra/pid")" 2>/dev/null &&
			kill -0 "$(cat "$rb/pid")" 2>/dev/null; then
			port=$porta
			break
		fi
		for r in "$ra" "$rb"; do
			kill "$(cat "$r/pid")" 2>/dev/null || true
			wait "$(cat "$r/pid")" 2>/dev/null || true
		done
		vmlab_log "pair: a guest could not bind its udp port (try $try): $(tail -n 2 "$ra/qemu.log" "$rb/qemu.log" | tr '\n' ' ')"
		port=
	done
	[[ -n $port ]] || vmlab_die 125 "pair: the guests never got their udp ports"

	# Guests do not power off after their command (see the init script):
	# both are stopped here once both commands have ended.  When one guest
	# fails, the other would often wait for ever (a server for a client
	# that never comes): it is stopped 30 s later.
	local pa pb done_a='' done_b='' stopped='' deadline=''
	pa=$(cat "$ra/pid")
	pb=$(cat "$rb/pid")
	while [[ -z $done_a || -z $done_b ]]; do
		sleep 0.5
		[[ ${GDRC_VMLAB_PROGRESS:-} != 1 ]] ||
			vmlab_pair_progress "$rb" $((SECONDS - t0))
		if [[ -z $done_a ]] && vmlab_pair_done "$ra" "$pa"; then
			done_a=1
			vmlab_pair_ok "$ra" || deadline=${deadline:-$((SECONDS + 30))}
		fi
		if [[ -z $done_b ]] && vmlab_pair_done "$rb" "$pb"; then
			done_b=1
			vmlab_pair_ok "$rb" || deadline=${deadline:-$((SECONDS + 30))}
		fi
		if [[ -n $deadline ]] && ((SECONDS > deadline)); then
			if [[ -z $done_a ]]; then
				stopped=A
				done_a=1
			fi
			if [[ -z $done_b ]]; then
				stopped=B
				done_b=1
			fi
		fi
	done
	[[ ${GDRC_VMLAB_PROGRESS:-} != 1 ]] ||
		vmlab_pair_progress "$rb" $((SECONDS - t0))
	kill "$pa" "$pb" 2>/dev/null || true
	local rca rcb rc
	vmlab_qemu_result "$ra"
	vmlab_qemu_result "$rb"
	rca=$(cat "$ra/result")
	rcb=$(cat "$rb/result")
	local sa="exit $rca" sb="exit $rcb"
	# A guest stopped because its peer failed did not fail itself.
	if [[ $stopped == A ]]; then
		sa="stopped 30 s after B failed"
		rca=0
	elif [[ $stopped == B ]]; then
		sb="stopped 30 s after A failed"
		rcb=0
	fi
	echo "----- A (server, 10.99.0.1): $sa -----"
	cat "$ra/out"
	echo "----- B (client, 10.99.0.2): $sb -----"
	cat "$rb/out"
	echo "----- end of pair -----"
	vmlab_explain "$ra" "$rca" "pair A (server)"
	vmlab_explain "$rb" "$rcb" "pair B (client)"
	if ((rca == 125 || rcb == 125)); then
		rc=125
	elif ((rca == 124 || rcb == 124)); then
		rc=124
	elif ((rca != 0)); then
		rc=$rca
	else
		rc=$rcb
	fi
	vmlab_log "pair: exit $rc after $((SECONDS - t0)) s (A: $rca$(vmlab_uptimes "$ra"); B: $rcb$(vmlab_uptimes "$rb"))"
	vmlab_finish_rundir "$ra" "$rc"
	vmlab_finish_rundir "$rb" "$rc"
	return "$rc"
}

# --- selftest -------------------------------------------------------------

VMLAB_PASSED=0
VMLAB_FAILED=0

# vmlab_check NAME FUNCTION: runs one check, its output indented.
vmlab_check() {
	local name=$1 fn=$2 t0=$SECONDS rc=0
	echo "=== vmlab selftest: $name"
	"$fn" >"$VMLAB_DIR/selftest/$fn.log" 2>&1 || rc=$?
	sed 's/^/  | /' "$VMLAB_DIR/selftest/$fn.log"
	if ((rc == 0)); then
		VMLAB_PASSED=$((VMLAB_PASSED + 1))
		echo "=== PASS $name ($((SECONDS - t0)) s)"
	else
		VMLAB_FAILED=$((VMLAB_FAILED + 1))
		echo "=== FAIL $name (status $rc, $((SECONDS - t0)) s)"
	fi
}

# (a) The guest runs Debian's kernel, loads rdma_rxe and gets an active
# soft-RoCE port that libibverbs sees.
vmlab_selftest_rxe() {
	bash "$VMLAB_SELF" run --share "$VMLAB_DIR/selftest" --timeout 300 -- bash -c '
		set -euxo pipefail
		test "$(uname -r)" = "'"$VMLAB_KVER"'"
		grep -q Debian /proc/version
		modprobe rdma_rxe
		modprobe ib_uverbs
		modprobe dummy numdummies=0
		ip link add d0 type dummy
		ip addr add 10.77.0.1/24 dev d0
		ip link set d0 up
		rdma link add rxe0 type rxe netdev d0
		ibv_devices | tee /tmp/devs
		grep -qw rxe0 /tmp/devs
		ibv_devinfo -d rxe0 | tee /tmp/info
		grep -q PORT_ACTIVE /tmp/info'
}

# (b) Two guests exchange RC messages over soft-RoCE.
vmlab_selftest_pingpong() {
	local pp='ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 4096'
	bash "$VMLAB_SELF" pair --share "$VMLAB_DIR/selftest" --timeout 400 -- \
		bash -c "$pp" -- \
		bash -c '
			# The server may start a moment after this client: retry
			# while nothing listens yet.
			for i in $(seq 30); do
				if out=$('"$pp"' "$GDRC_PEER" 2>&1); then
					echo "$out"
					exit 0
				fi
				echo "$out"
				case $out in *"t connect"*) sleep 1 ;; *) exit 1 ;; esac
			done
			exit 1'
}

# (c) An out-of-tree module, built on the host against the guest kernel's
# headers, loads and unloads in the guest and logs to dmesg.
vmlab_selftest_module() {
	local dir=$VMLAB_DIR/selftest/hello token
	mkdir -p "$dir"
	# Rewritten only when it changes, so make has nothing to do on a second
	# run.
	cat >"$dir/vmlab_hello.c.new" <<'EOF'
// SPDX-License-Identifier: GPL-2.0
// vmlab selftest module: logs on load and unload.
#include <linux/init.h>
#include <linux/module.h>

static char *token = "none";
module_param(token, charp, 0444);

static int __init vmlab_hello_init(void)
{
	pr_info("vmlab_hello: loaded, token=%s\n", token);
	return 0;
}

static void __exit vmlab_hello_exit(void)
{
	pr_info("vmlab_hello: unloaded, token=%s\n", token);
}

module_init(vmlab_hello_init);
module_exit(vmlab_hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gdrcache VM lab selftest module");
EOF
	echo 'obj-m := vmlab_hello.o' >"$dir/Kbuild.new"
	local f
	for f in vmlab_hello.c Kbuild; do
		if cmp -s "$dir/$f.new" "$dir/$f"; then
			rm "$dir/$f.new"
		else
			mv "$dir/$f.new" "$dir/$f"
		fi
	done
	[[ -d /lib/modules/$VMLAB_KVER/build ]] || {
		echo "no /lib/modules/$VMLAB_KVER/build: linux-headers for $VMLAB_KVER missing"
		return 1
	}
	echo "+ make -C /lib/modules/$VMLAB_KVER/build M=$dir modules (on the host)"
	make -s -C "/lib/modules/$VMLAB_KVER/build" M="$dir" modules || {
		echo "module build failed"
		return 1
	}
	token=t$$x$RANDOM
	(cd "$dir" && bash "$VMLAB_SELF" run --share "$VMLAB_DIR/selftest" --timeout 300 -- bash -c '
		set -euxo pipefail
		insmod ./vmlab_hello.ko token='"$token"'
		grep -qw vmlab_hello /proc/modules
		rmmod vmlab_hello
		dmesg | grep vmlab_hello
		dmesg | grep -c "vmlab_hello: loaded, token='"$token"'"
		dmesg | grep -c "vmlab_hello: unloaded, token='"$token"'"')
}

# (d) The command's status comes back, and the share is written through.
vmlab_selftest_status() {
	local f=$VMLAB_DIR/selftest/status.txt rc=0
	rm -f "$f"
	bash "$VMLAB_SELF" run --share "$VMLAB_DIR/selftest" --timeout 300 \
		-e "VMLAB_FILE=$f" -- \
		bash -c 'echo "written in $(uname -r)" >"$VMLAB_FILE"; echo "to stdout"; echo "to stderr" >&2; exit 7' || rc=$?
	echo "run returned $rc (expected 7); the share holds: $(cat "$f" 2>/dev/null)"
	[[ $rc == 7 ]] && grep -q "written in $VMLAB_KVER" "$f"
}

vmlab_cmd_selftest() {
	local rc=0 t0=$SECONDS
	vmlab_check_enabled
	VMLAB_KVER=$(vmlab_deps) || rc=$?
	((rc == 0)) || vmlab_skip "the lab's packages are missing and could not be installed (see above)"
	command -v qemu-system-x86_64 >/dev/null || vmlab_skip "qemu-system-x86_64 not found"
	mkdir -p "$VMLAB_DIR/selftest"
	echo "vmlab selftest: guest kernel $VMLAB_KVER, cache $VMLAB_DIR"
	vmlab_check "run: Debian kernel, rdma_rxe, ibv_devices" vmlab_selftest_rxe
	vmlab_check "pair: ibv_rc_pingpong between two guests" vmlab_selftest_pingpong
	vmlab_check "run: out-of-tree module insmod/rmmod" vmlab_selftest_module
	vmlab_check "run: exit status and share write-back" vmlab_selftest_status
	echo "vmlab selftest took $((SECONDS - t0)) s"
	echo "vmlab: $VMLAB_PASSED passed, $VMLAB_FAILED failed"
	((VMLAB_FAILED == 0))
}

vmlab_main() {
	local sub=${1:-}
	(($#)) && shift
	case $sub in
	deps)
		vmlab_check_enabled
		vmlab_deps
		;;
	run) vmlab_cmd_run "$@" ;;
	pair) vmlab_cmd_pair "$@" ;;
	selftest) vmlab_cmd_selftest ;;
	-h | --help | help) vmlab_usage ;;
	*) vmlab_usage ;;
	esac
}

vmlab_main "$@"
