/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hooks_int.h - what hooks.c and the patcher share, plus queries that
 * tests and diagnostics need.  The rest of the library uses hooks.h only.
 *
 * Depends on hooks.h and the C library.
 */
#ifndef GDRC_HOOKS_INT_H
#define GDRC_HOOKS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hooks.h"

/*
 * Hook context (called by the replacement functions, after their system
 * call succeeded).  [addr, addr + len) lost its old contents: widen it to
 * whole pages and hand it to every subscriber.  An empty or wrapping range
 * is dropped.  errno is the same on return as on entry.
 */
void gdrc_hooks_report(uintptr_t addr, size_t len);

#ifdef __x86_64__
/* libc's own entry points, for the self test (patched by then). */
struct gdrc_patch_libc {
	void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd,
		      off_t off);
	int (*munmap)(void *addr, size_t len);
	const char *path; /* libc's file name, for the log */
};

/*
 * Install time, under hooks.c's once.  Patch libc's munmap, mremap,
 * madvise, brk and mmap: all of them or none.
 * @return 0 and fills *libc; -1 with a reason in why (nothing patched).
 */
int gdrc_patch_apply(struct gdrc_patch_libc *libc, char *why,
		     size_t why_len);

/* Install time: undo gdrc_patch_apply() (the self test failed). */
void gdrc_patch_revert(void);

/* @return 1 if every entry point still holds our jump, else 0. */
int gdrc_patch_intact(void);
#endif

#endif /* GDRC_HOOKS_INT_H */
