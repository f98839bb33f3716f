/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map_pages.h - for cmocka tests: anonymous pages mapped preferably at
 * an address, never over anything already mapped there.
 */
#ifndef GDRC_TEST_MAP_PAGES_H
#define GDRC_TEST_MAP_PAGES_H

#include <stddef.h>
#include <sys/mman.h>

/* len bytes of fresh pages, at hint if it is free (NULL: anywhere). */
static inline char *map_at(void *hint, size_t len)
{
	char *p = mmap(hint, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS |
			       (hint ? MAP_FIXED_NOREPLACE : 0),
		       -1, 0);

	assert_true(p != MAP_FAILED);
	return p;
}

#endif /* GDRC_TEST_MAP_PAGES_H */
