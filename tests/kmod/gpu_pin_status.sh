#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ctest kmod_gpu_pin: what the GPU-pin half of kmod_subscribe did, as its
# own result, so that a machine without NVIDIA's nv-p2p.h reports that
# half skipped, with the reason, while the host-subscription half it did
# run counts as passed.  Reads tests/kmod/.out/gpu_status, which
# run_kmod_tests.sh writes ("ran", or "skipped: why").
# Exit: 0 ran and passed; 77 skipped (the reason printed).
status=$(cat "$(dirname "$0")/.out/gpu_status" 2>/dev/null)
case $status in
ran)
	echo "kmod: GPU pins through the mock provider ran and passed"
	exit 0 ;;
skipped:*)
	echo "kmod: GPU pin tests $status"
	exit 77 ;;
*)
	echo "kmod: no result: kmod_subscribe did not run to the end"
	exit 77 ;;
esac
