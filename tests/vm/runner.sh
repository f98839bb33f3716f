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
