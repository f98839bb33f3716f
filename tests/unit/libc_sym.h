/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libc_sym.h - for tests that call glibc's own malloc, free or munmap
 * past any interposer (the preload, jemalloc, the hooks' patches):
 * glibc's definition of a symbol, by its x86-64 base version.
 * Needs _GNU_SOURCE (dlvsym) before the first include of <dlfcn.h>.
 */
#ifndef GDRC_TEST_LIBC_SYM_H
#define GDRC_TEST_LIBC_SYM_H

#include <dlfcn.h>

/* glibc's own name, or NULL (libc.so.6 not loaded, no such symbol). */
static inline void *libc_sym(const char *name)
{
	void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	void *p;

	if (!h)
		return NULL;
	p = dlvsym(h, name, "GLIBC_2.2.5");
	dlclose(h);
	return p;
}

#endif /* GDRC_TEST_LIBC_SYM_H */
