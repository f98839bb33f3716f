#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run a GPU test program: run_gpu_test.sh PROGRAM [ARGS...]
# The GPU tests link the CUDA driver (libcuda.so.1) directly, so where no
# driver is installed the dynamic loader would refuse to start them
# (status 127, a failure).  That is "no GPU": report it as skipped (77),
# as the program itself does when cuInit finds no device.
prog=$1
if command -v ldd >/dev/null 2>&1 &&
	ldd "$prog" 2>/dev/null | grep -q 'libcuda\.so\.1 => not found'; then
	echo "skipped: no GPU (libcuda.so.1, the CUDA driver, is not installed)"
	exit 77
fi
exec "$@"
