# SPDX-License-Identifier: BSD-3-Clause
# runner.sh: sourced (bash) by the scripts that run a test in VM lab
# guests.  Sets vmlab (the lab's script) and repo (the share the guests
# see, at the same path); defines:
#   vm_require NAME       exit 77 ("NAME: VM lab unavailable") unless the
#                         lab's packages are there (installs them if it
#                         can, as vmlab.sh deps does)
#   vm_stage DIR FILE...  copy FILEs into DIR (inside the share), a
#                         shared library under its soname, so that the
#                         guest's loader finds it there
#   vm_begin NAME FILE... vm_require NAME, then stage FILEs in a folder
#                         of this run's own, out (set), removed at exit
#   vm_run NAME CMD       run CMD (sh -c) in one guest that sees the
#                         share, with 2 CPUs; if the guest's status is
#                         not 0, say so and exit with it
#   vm_stage_preload DIR PROG PRELOAD_SO
#                         stage a program and libgdrcache-preload.so,
#                         with libgdrcache.so.0 beside it (its $ORIGIN);
#                         sets p (the program as staged), asan (an ASan
#                         build's runtime, or empty) and pre (what
#                         LD_PRELOAD must hold: that runtime first)
runner_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$runner_dir/../.." && pwd -P)
vmlab=$runner_dir/vmlab.sh

vm_require() {
	local rc=0

	bash "$vmlab" deps >/dev/null || rc=$?
	if ((rc != 0)); then
		echo "$1: VM lab unavailable ($rc): skipped"
		exit 77
	fi
}

vm_run() {
	local rc=0

	bash "$vmlab" run --share "$repo" --timeout 300 --smp 2 -- \
		sh -c "$2" || rc=$?
	if ((rc != 0)); then
		echo "$1: guest exit status $rc"
		exit "$rc"
	fi
}

vm_stage_preload() {
	local lib=$3

	vm_stage "$1" "$2" "$lib" "$(dirname "$lib")/libgdrcache.so.0" ||
		return 1
	p=$1/$(basename "$2")
	asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ && !n++ { print $3 }')
	pre="${asan:+$asan }$1/$(basename "$lib")"
}

vm_begin() {
	vm_require "$1"
	out=$runner_dir/.out/$1.$$
	trap 'rm -rf "$out"' EXIT
	shift
	vm_stage "$out" "$@" || exit 1
}

vm_stage() {
	local dir=$1 f soname
	shift
	mkdir -p "$dir" || return 1
	for f in "$@"; do
		soname=$(objdump -p "$f" 2>/dev/null |
			awk '$1 == "SONAME" { print $2 }')
		cp -L "$f" "$dir/${soname:-$(basename "$f")}" || return 1
	done
}
