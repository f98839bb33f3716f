#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# udev_entry.sh - the udev database entry cuFile needs to register a file
# handle, written only where the machine has no udev database at all.
#
# cuFileHandleRegister looks the file's disk up in udev's database
# (ID_FS_USAGE, ID_FS_TYPE, ID_FS_UUID).  In a container without
# /run/udev it finds nothing (cufile.log: "udev property not found:
# ID_FS_USAGE vda") and fails with 5027 (CU_FILE_HANDLE_NOT_REGISTERED),
# in compatibility mode too; with an entry for the disk written before the
# program starts, the handle registers and cuFileRead works
# (shared/research/storage-probe.md, the GPU machine, 2026-11-27).
#
# Usage: tests/gpu/udev_entry.sh [FOLDER...]     (default: / /tmp)
# For the device holding each folder, writes /run/udev/data/b<major>:<minor>
# (E:ID_FS_USAGE=filesystem, E:ID_FS_TYPE=<its type>, a made-up
# E:ID_FS_UUID) - only when /run/udev does not exist, or exists because
# this script made it (the marker /run/udev/.gdrcache-made), and never
# over an entry already there.  A machine with a real udev database is
# left alone.  Says what it did, one line each.  Exit 0 (also when it
# had nothing to write), 1 when it should have written and could not.
# UDEV_ENTRY_DIR names another folder than /run/udev (to try the script).
set -u

case "${1:-}" in
-h | --help)
	sed -n '3,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
	exit 0 ;;
esac

udev=${UDEV_ENTRY_DIR:-/run/udev}
marker=$udev/.gdrcache-made
if [ -e "$udev" ] && [ ! -e "$marker" ]; then
	echo "udev_entry: $udev exists (this machine's own udev database):" \
		"nothing written"
	exit 0
fi
[ $# -gt 0 ] || set -- / /tmp
if ! mkdir -p "$udev/data" 2>/dev/null || ! touch "$marker" 2>/dev/null
then
	echo "udev_entry: cannot create $udev/data (not root?): nothing" \
		"written; cuFileHandleRegister will fail with 5027"
	exit 1
fi

rc=0
n=0
for dir in "$@"; do
	if [ ! -d "$dir" ]; then
		echo "udev_entry: $dir is no folder: skipped"
		continue
	fi
	majmin=$(findmnt -n -o MAJ:MIN --target "$dir" 2>/dev/null |
		head -n 1 | tr -d ' ')
	fstype=$(findmnt -n -o FSTYPE --target "$dir" 2>/dev/null |
		head -n 1 | tr -d ' ')
	if [ -z "$majmin" ]; then
		# Without findmnt: the mount point's device, as the probe did.
		majmin=$(mountpoint -d "$(stat -c %m "$dir")" 2>/dev/null)
		fstype=$(stat -f -c %T "$dir" 2>/dev/null)
	fi
	if [ -z "$majmin" ]; then
		echo "udev_entry: no device found for $dir: nothing written"
		rc=1
		continue
	fi
	[ -n "$fstype" ] || fstype=ext4
	entry=$udev/data/b$majmin
	if [ -e "$entry" ]; then
		echo "udev_entry: $entry is there already ($dir): left alone"
		continue
	fi
	note=""
	case "$majmin" in
	0:*) note=" (no block device: written in case cuFile asks for it)" ;;
	esac
	n=$((n + 1))
	if printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\nE:ID_FS_UUID=00000000-0000-0000-0000-%012d\n' \
		"$fstype" "$n" >"$entry"; then
		echo "udev_entry: wrote $entry for $dir ($fstype, device" \
			"$majmin)$note"
	else
		echo "udev_entry: could not write $entry"
		rc=1
	fi
done
exit $rc
