#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The README's commands run exactly as written: every scripts/... command
# in the sh block under "## The two commands" is an executable file (in
# a fresh clone that is git's mode) and answers --help with its usage,
# exit 0, without installing or building anything.  (scripts/demo.sh was
# once mode 644: the README's first command failed, and nothing noticed.)
# Usage: check_readme_commands.sh SOURCE_DIR
set -u
top=${1:?usage: check_readme_commands.sh SOURCE_DIR}
cd "$top" || exit 1
cmds=$(awk '/^## The two commands/ { sect = 1; next }
	    sect && /^## / { exit }
	    sect && /^```/ { blk = !blk; next }
	    sect && blk && $1 ~ /^scripts\// { print $1 }' README.md)
n=0
fail=0
for c in $cmds; do
	n=$((n + 1))
	if [ ! -f "$c" ] || [ ! -x "$c" ]; then
		echo "FAIL: $c (README) is not an executable file"
		fail=1
		continue
	fi
	out=$(timeout 20 "./$c" --help 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || ! printf '%s\n' "$out" | grep -qi 'usage'; then
		echo "FAIL: $c --help: exit $rc, no usage text"
		fail=1
		continue
	fi
	echo "ok: $c"
done
if [ $n -lt 2 ]; then
	echo "FAIL: found $n command(s) in README.md's command block, expected 2"
	exit 1
fi
exit $fail
