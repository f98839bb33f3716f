/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vm_pages.h - for the tests that set an address-space limit
 * (RLIMIT_AS): the size of this process's address space now.
 */
#ifndef GDRC_TEST_VM_PAGES_H
#define GDRC_TEST_VM_PAGES_H

#include <stdio.h>

/* The pages of this process's address space (/proc/self/statm), or -1. */
static inline long vm_pages(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

#endif /* GDRC_TEST_VM_PAGES_H */
