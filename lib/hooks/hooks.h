/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hooks.h - process-wide host memory event source.
 *
 * Reports every range of the address space whose old contents went away:
 * munmap, mremap (the old range, and the target of MREMAP_FIXED), madvise
 * with MADV_DONTNEED, MADV_FREE, MADV_REMOVE, MADV_DONTNEED_LOCKED or
 * MADV_GUARD_INSTALL, a shrinking brk/sbrk, and mmap(MAP_FIXED) over an
 * existing range.  A call that failed is reported too, since it may have
 * zapped or unmapped part of the range first; only a munmap, mremap or
 * madvise with an unaligned start, which the kernel refuses before doing
 * anything, is not.  Calls made inside glibc (malloc trimming, free of a
 * large block) are seen as well: on x86-64 the first instructions of
 * glibc's own functions are replaced by a jump to ours, which perform
 * the system call themselves.
 *
 * Events are reported after the system call returned and before it
 * returns to its caller, in "hook context": the subscriber's callback may
 * run inside malloc, with glibc's locks held, in any thread, even in a
 * signal handler.  It must not allocate, log, call CUDA or wait on a lock
 * that may be held around a memory call.
 *
 * Depends only on log/ (and only outside hook context).  The cache never
 * includes this header; the API layer (api_sources.c) subscribes on its behalf.
 */
#ifndef GDRC_HOOKS_H
#define GDRC_HOOKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <gdrcache.h>

#include "gdrc_int.h"

/* Subscribers at most. */
#define GDRC_HOOKS_MAX_SUBSCRIBERS 64

/* Where an event came from. */
enum gdrc_hooks_source {
	GDRC_HOOKS_SRC_HOST, /* [start, end) page aligned, contents gone */
	GDRC_HOOKS_SRC_CUDA, /* a CUDA free: every allocation overlapping
			      * [start, end) is gone (a free by base
			      * address reports [base, base + 1)) */
	GDRC_HOOKS_SRC_UCM,  /* as HOST, received from UCX's UCM */
	GDRC_HOOKS_SRC_UFFD, /* as HOST, read from userfaultfd (uffd.c) */
};

/* Hook-context callback: start < end; source: enum gdrc_hooks_source. */
typedef void (*gdrc_hooks_event_fn)(uintptr_t start, uintptr_t end,
				    int source, void *arg);

/*
 * Install the hooks once per process and self-test them (an mmap and
 * munmap of one page must be reported).  Later calls return the first
 * call's result.  Thread safe.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED if this architecture or libc
 *         cannot be patched or the self test failed (logged why).
 */
gdrc_status_t gdrc_hooks_install(void);

/* @return 1 if gdrc_hooks_install() succeeded, else 0. */
int gdrc_hooks_active(void);

/* Where host events come from (docs/hooks.md, "Event sources"). */
enum gdrc_hooks_host_src {
	GDRC_HOOKS_HOST_NONE,  /* not installed, or install failed */
	GDRC_HOOKS_HOST_PATCH, /* our jumps in glibc's functions */
	GDRC_HOOKS_HOST_UCM,   /* UCX's UCM owns them: its events */
};

/*
 * The host source now; *name_p (may be NULL): a description with the
 * object it lives in, NULL for none.  Any context but hook context.
 */
int gdrc_hooks_host_source(const char **name_p);

/*
 * Our glibc patches were overwritten (gdrc_hooks_intact() is 0): if by
 * UCX's UCM, subscribe to its events instead, call flush() (which must
 * drop every host registration cached so far: unmaps since the overwrite
 * went unseen), and only then let the probe pass again.  Not hook
 * context; serialised.
 * @return GDRC_OK (events flow again, or another caller already did
 *         it); GDRC_ERR_UNSUPPORTED (flush not called).
 */
gdrc_status_t gdrc_hooks_retake(void (*flush)(void));

/*
 * Add a subscriber; events that complete after this returns reach it.
 * @return a slot number >= 0, or GDRC_ERR_LIMIT when all are taken.
 * Thread safe, not hook-safe.
 */
int gdrc_hooks_subscribe(gdrc_hooks_event_fn fn, void *arg);

/*
 * Remove a subscriber.  When this returns, fn is not running and will
 * not be called again for this slot.  Thread safe, not hook-safe.
 */
void gdrc_hooks_unsubscribe(int slot);

/* Events delivered since the process started (for tests and stats). */
uint64_t gdrc_hooks_event_count(void);
uint64_t gdrc_hooks_cuda_event_count(void);

/*
 * userfaultfd (uffd.c), for GDRC_MEM_HOOKS=uffd: start its reader once
 * per process and self-test it (a registered page's unmap must be
 * reported).  Its events reach the subscribers above, source
 * GDRC_HOOKS_SRC_UFFD, inside the same busy window as the hooks', but
 * only for ranges given to gdrc_uffd_watch.  Patches nothing.  Later
 * calls return the first call's result; a fork child has none.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED (gdrc_uffd_reason says why).
 */
gdrc_status_t gdrc_uffd_start(void);

/*
 * Watch [start, start + len) (page aligned) until it is unmapped: its
 * unmap, removal or move is reported from now on.  A system call; not
 * hook context.  @return 0; -errno (EINVAL: a mapping userfaultfd
 * cannot watch, such as a file; EBUSY: another userfaultfd watches it;
 * ENODEV: not started).
 */
int gdrc_uffd_watch(uintptr_t start, size_t len);

/* Why userfaultfd is off; NULL while it is on. */
const char *gdrc_uffd_reason(void);

/*
 * CUDA free hooks (cuhooks.c), once per process: detour libcuda's free
 * functions (every address dlsym and cuGetProcAddress give out for
 * cuMemFree, cuMemFreeAsync, cuMemFreeHost, cuMemHostUnregister,
 * cuMemUnmap) so that each free is reported, source GDRC_HOOKS_SRC_CUDA,
 * before the driver runs it.  libcuda: a dlopen handle to the driver.
 * Later calls return the first call's result.  Needs no CUDA context.
 * @return GDRC_OK; GDRC_ERR_UNSUPPORTED (gdrc_cuhooks_reason says why).
 */
gdrc_status_t gdrc_cuhooks_install(void *libcuda);

/*
 * A second step of every CUDA free the hooks see, after the subscribers
 * queued it and before the driver frees: fn(start, end) runs in the
 * freeing thread, inside its cuMemFree, and is not hook context (it may
 * lock, allocate and call cuFile; it must keep errno).  For contexts
 * whose registrations must be gone before the memory is (the cufile
 * backend: api_cufile.c).  Set once; NULL: none.
 */
typedef void (*gdrc_hooks_sync_fn)(uintptr_t start, uintptr_t end);
void gdrc_hooks_set_cuda_sync(gdrc_hooks_sync_fn fn);

/* @return 1 once gdrc_cuhooks_install() succeeded. */
int gdrc_cuhooks_active(void);

/* Why the CUDA hooks are off; NULL while they are on. */
const char *gdrc_cuhooks_reason(void);

/* @return 1 if every detoured entry still holds our jump. */
int gdrc_cuhooks_intact(void);

/*
 * Allocate and free a small buffer through cuGetProcAddress's entry
 * points (the runtime's path) and check the free was reported.  Needs a
 * current CUDA context; not hook context.
 * @return 0, or -1 with why.
 */
int gdrc_cuhooks_self_test(char *why, size_t why_len);

/*
 * Why gdrc_hooks_install() failed, as a lowercase sentence; NULL if it
 * succeeded.  Thread safe, not hook-safe.
 */
const char *gdrc_hooks_reason(void);

/*
 * @return 1 if the hooks are installed and every patched entry point
 * still holds our jump, else 0.  Another library that patches glibc after
 * us (UCX, libfabric and Open MPI do) silently takes the events away; the
 * cache must then stop trusting the hooks.  Reads memory only.
 */
int gdrc_hooks_intact(void);

/*
 * The fast-path form of gdrc_hooks_intact(): compares the first eight
 * bytes of patched munmap with our jump, one load.  Whoever patches glibc
 * patches munmap, so a foreign patch shows here first.  While no hooks
 * are active the address is gdrc_probe_none's, a zero word, and the value
 * 0: never NULL, so the check has no branch of its own.  (Set value
 * first, then address: a reader that sees one new and one old finds them
 * unequal and goes slow, which is safe.)
 */
extern GDRC_HIDDEN const uint64_t gdrc_probe_none;
extern GDRC_HIDDEN const uint64_t *_Atomic gdrc_hooks_probe_addr;
extern GDRC_HIDDEN _Atomic uint64_t gdrc_hooks_probe_val;
/* The same for the CUDA hooks: the first eight bytes of cuMemFree_v2. */
extern GDRC_HIDDEN const uint64_t *_Atomic gdrc_cuhooks_probe_addr;
extern GDRC_HIDDEN uint64_t gdrc_cuhooks_probe_val;

/*
 * Replacements in progress: a replacement that may lose memory counts
 * itself here from before its system call until its event has been
 * handed to every subscriber.  In that window another thread may already
 * map the same addresses again and ask for them, while the cache still
 * holds the old registration: a get must not trust the cache while this
 * is nonzero (gdrc_hooks_idle) and waits for the window to close
 * (gdrc_hooks_wait_idle) before it looks in the tree.
 */
extern GDRC_HIDDEN _Atomic unsigned gdrc_hooks_busy;

/* Any context: one load.  0 while a replacement is in its window. */
static inline int gdrc_hooks_idle(void)
{
	return atomic_load_explicit(&gdrc_hooks_busy,
				    memory_order_acquire) == 0;
}

/*
 * Wait until every replacement that was in its window when this was
 * called has delivered its event (later ones may still be running); one
 * load when none is.  The count is striped by thread, so a steady stream
 * of unmaps elsewhere cannot starve the wait.  Not hook context, and not
 * from a signal handler that may have interrupted a replacement.
 */
void gdrc_hooks_wait_idle(void);

/* The C library's probe alone: all a hit on memory CUDA does not know
 * needs (hit.h, gdrc_cache_get_host). */
static inline int gdrc_hooks_probe_libc_ok(void)
{
	const uint64_t *p = atomic_load_explicit(&gdrc_hooks_probe_addr,
						 memory_order_relaxed);

	return *(const volatile uint64_t *)p ==
	       atomic_load_explicit(&gdrc_hooks_probe_val,
				    memory_order_relaxed);
}

/* The CUDA hooks' probe alone. */
static inline int gdrc_hooks_probe_cuda_ok(void)
{
	const uint64_t *q = atomic_load_explicit(&gdrc_cuhooks_probe_addr,
						 memory_order_relaxed);

	return *(const volatile uint64_t *)q == gdrc_cuhooks_probe_val;
}

static inline int gdrc_hooks_probe_ok(void)
{
	const uint64_t *p = atomic_load_explicit(&gdrc_hooks_probe_addr,
						 memory_order_relaxed);
	const uint64_t *q = atomic_load_explicit(&gdrc_cuhooks_probe_addr,
						 memory_order_relaxed);

	/* One word after the other: a hit that compares both at once
	 * holds four values in registers, and its caller then saves
	 * registers for them.  (Both addresses loaded first: loading the
	 * second after the first compare cost 0.4 ns of a 6.7 ns hit and
	 * put on the CPU machine.) */
	return *(const volatile uint64_t *)p ==
		       atomic_load_explicit(&gdrc_hooks_probe_val,
					    memory_order_relaxed) &&
	       *(const volatile uint64_t *)q == gdrc_cuhooks_probe_val;
}

#endif /* GDRC_HOOKS_H */
