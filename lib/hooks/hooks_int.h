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
#include <sys/mman.h>
#include <sys/types.h>

#include "gdrc_int.h"
#include "hooks.h"

/* Advice older headers lack. */
#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MADV_REMOVE
#define MADV_REMOVE 9
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13: zaps the pages it guards */
#endif

/* Hook context: does madvise(advice) throw a range's contents away? */
GDRC_HOOK_CONTEXT
static inline int gdrc_hooks_advice_loses(int advice)
{
	return advice == MADV_DONTNEED || advice == MADV_FREE ||
	       advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED ||
	       advice == MADV_GUARD_INSTALL;
}

/*
 * Hook context (called by the replacement functions, after their system
 * call succeeded).  [addr, addr + len) lost its old contents: widen it to
 * whole pages and hand it to every subscriber.  An empty or wrapping range
 * is dropped.  errno is the same on return as on entry.
 */
void gdrc_hooks_report(uintptr_t addr, size_t len);

/* The same, from a host source other than our patch (src: enum
 * gdrc_hooks_source, GDRC_HOOKS_SRC_UCM). */
void gdrc_hooks_report_src(uintptr_t addr, size_t len, int src);

/*
 * Hook context: bracket a replacement's system call and its report (see
 * gdrc_hooks_busy).  enter returns the stripe to hand to leave.
 */
unsigned gdrc_hooks_enter(void);
void gdrc_hooks_leave(unsigned stripe);

/* Hook context: the calling thread's stripe, as enter returns it. */
unsigned gdrc_hooks_stripe(void);

/*
 * ucm.c: UCX's UCM events as the host event source, for when UCM's
 * bistro patches own libc's functions.  Install time (serialised by
 * hooks.c).  owner: the object libc's munmap (libc_munmap, which the
 * self test calls) jumps into.
 * @return 0 subscribed and self-tested; 1 owner is not UCM (why
 *         untouched); -1 owner is UCM but its events do not reach us,
 *         with why (nothing left subscribed).
 */
int gdrc_ucm_start(const char *owner, void *libc_munmap, char *why,
		   size_t why_len);

/* @return 1 while libc's functions still hold what they held when
 * gdrc_ucm_start() subscribed (UCM's jumps), else 0.  Reads memory. */
int gdrc_ucm_intact(void);

/* Hook context (cuhooks.c): [start, end) of CUDA memory being freed,
 * handed to every subscriber as is.  errno is preserved. */
void gdrc_hooks_report_cuda(uintptr_t start, uintptr_t end);

#ifdef __x86_64__
/* libc's own entry points, for the self test (patched by then). */
struct gdrc_patch_libc {
	void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd,
		      off_t off);
	int (*munmap)(void *addr, size_t len);
	const char *path; /* libc's file name, for the log */
	/* The object whose hooks ours call (Open MPI's, libfabric's), whose
	 * patch ours went over; NULL when we make the system calls. */
	const char *chained_to;
};

/*
 * Install time, under hooks.c's once, or a retake (hooks.c's retake
 * lock).  Patch libc's munmap, mremap, madvise, brk and mmap: all of them
 * or none.  A function Open MPI's or libfabric's hooks patched first is
 * patched over, ours calling theirs (chained).
 * @return 0 and fills *libc; -1 with a reason in why (nothing patched).
 */
int gdrc_patch_apply(struct gdrc_patch_libc *libc, char *why,
		     size_t why_len);

/*
 * Does libc's function name (munmap, ...) already jump elsewhere?  Not
 * hook context.  *entry_p: libc's definition.  owner: the file name of
 * the object it jumps into ("" when unknown).
 * @return 1 redirected; 0 not; -1 no libc.so.6 or no such symbol.
 */
int gdrc_patch_owner(const char *name, void **entry_p, char *owner,
		     size_t owner_len);

/* Install time: undo gdrc_patch_apply() (the self test failed). */
void gdrc_patch_revert(void);

/* @return 1 if every entry point still holds our jump, else 0. */
int gdrc_patch_intact(void);

/* Code at src into buf / len bytes of new code at dst (detour_x86_64.c);
 * write parks new callers while it works.  @return 0, or -1 (errno). */
void gdrc_code_read(uint8_t *buf, const uint8_t *src, size_t len);
int gdrc_code_write(uint8_t *dst, const uint8_t *src, size_t len);

/* Bytes of a function's entry a detour may displace, at most. */
#define GDRC_DETOUR_SAVE 24

/* One function whose callers are sent to a replacement. */
struct gdrc_detour {
	uint8_t *fn;                   /* patched entry; NULL: none */
	void *orig;                    /* call this for the original code */
	int chained;                   /* fn already jumped elsewhere */
	unsigned saved_len;            /* bytes displaced */
	uint8_t saved[GDRC_DETOUR_SAVE]; /* their original contents */
	uint8_t jmp[5];                /* what we wrote at fn */
};

/*
 * Install time, not hook context.  Send every call of fn to repl, which
 * may call d->orig to run fn's original code.
 * @return 0; -1 with why (nothing changed) when fn's first instructions
 *         cannot be relocated or no island page is free nearby.
 */
int gdrc_detour_install(struct gdrc_detour *d, void *fn, void *repl,
			char *why, size_t why_len);

/* Put fn's first bytes back (the trampoline stays allocated). */
void gdrc_detour_remove(struct gdrc_detour *d);

/* @return 1 if fn still holds our jump, else 0.  Reads memory only. */
int gdrc_detour_intact(const struct gdrc_detour *d);
#endif

#endif /* GDRC_HOOKS_INT_H */
